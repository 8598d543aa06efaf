#!/usr/bin/python3
"""Drive a kubevirt-redfish system through the real sushy library, the way Ironic does.

Usage:
    sushy_ironic.py --base-url http://127.0.0.1:8000 --user admin --password password \
        --system /redfish/v1/Systems/tenant-a.cp-0

Every option can also come from the environment: KRF_BASE_URL, KRF_USER, KRF_PASSWORD,
KRF_SYSTEM. The script prints one JSON line per step ({"step": ..., "ok": true, ...}) and a
final {"result": "PASS"|"FAIL", ...} line, and exits non-zero on the first failure, with the
last HTTP exchanges on stderr.

Besides the outcome of each operation it watches how sushy itself copes with the service:
 * every WARNING (or worse) that sushy logs is recorded; unexpected ones fail the run;
 * every HTTP response of 400 or more is recorded; unexpected ones fail the run (the failed
   session login of sushy's "auto" auth, which falls back to Basic, is expected);
 * values that sushy maps onto its enumerations and silently turns into None because it does
   not know them are reported as failures.
Use --lenient to only report these instead of failing on them.

Only what sushy exposes is used: Sushy(), get_system(), System.refresh(), reset_system(),
set_system_boot_options(), get_allowed_*(), .managers, .chassis and the parsed fields, plus
the public `response_callback` of sushy.connector.Connector to trace the HTTP exchanges.
Written for sushy 4.x (Debian 12 ships 4.3.3) and newer.
"""

import argparse
import gc
import json
import logging
import os
import re
import sys
import time
import traceback
import uuid as uuidlib

try:
    import sushy
    from sushy import connector as sushy_connector
    from sushy import exceptions as sushy_exc
except ImportError as exc:  # pragma: no cover - reported to the Go test
    print(json.dumps({"result": "FAIL", "error": "cannot import sushy: %s "
                      "(install python3-sushy: apt-get install -y python3-sushy)" % exc}))
    sys.exit(2)

# Ironic's power polling: first look after 1 s, every 1 s, give up after 60 s.
POWER_POLL_INTERVAL = 1.0
POWER_TIMEOUT = 60.0
# How long a consumed Once override may take to show.
ONCE_TIMEOUT = 15.0

# Warnings that are expected from sushy against this service today. Each is a regex matched
# against the formatted log message.
EXPECTED_WARNINGS = [
    # Session login is not offered yet; sushy's auto auth falls back to Basic. (The server
    # answers the login POST with 401, so sushy also logs an ERROR telling the operator to
    # check the credentials; a 405 would let it fall back quietly.)
    r'Falling back to "Basic" authentication',
    r'^Authentication to the session service failed',
]


def val(x):
    """The Redfish string behind a sushy enumeration member (sushy >= 4) or a plain string."""
    return getattr(x, "value", x)


class Failure(Exception):
    pass


class Recorder(logging.Handler):
    """Keeps every WARNING+ record sushy logs."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.records = []

    def emit(self, record):
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001 - never let logging break the run
            msg = str(record.msg)
        self.records.append({"logger": record.name, "level": record.levelname, "message": msg})


class Trace:
    """HTTP exchanges seen through sushy's response_callback."""

    def __init__(self, password):
        self.exchanges = []
        self.password = password

    def __call__(self, response):
        req = response.request
        body = req.body
        if isinstance(body, bytes):
            body = body.decode("utf-8", "replace")
        if body and self.password:
            body = body.replace(self.password, "***")
        entry = {
            "method": req.method,
            "path": re.sub(r"^https?://[^/]+", "", req.url),
            "status": response.status_code,
        }
        if body:
            entry["request"] = body
        if req.headers.get("If-Match"):
            entry["if_match"] = req.headers["If-Match"]
        if response.status_code >= 400:
            entry["response"] = response.text[:2000]
        self.exchanges.append(entry)


class Run:
    def __init__(self, args):
        self.args = args
        self.recorder = Recorder()
        self.trace = Trace(args.password)
        self.steps = 0
        self.notes = []
        self.seen_warnings = 0
        self.seen_exchanges = 0
        self.root = None
        self.system = None
        self.auth = None
        self.started = time.monotonic()

    # ---- reporting ---------------------------------------------------------------------

    def emit(self, obj):
        print(json.dumps(obj, default=str, sort_keys=False), flush=True)

    def step(self, name, fn):
        t0 = time.monotonic()
        try:
            detail = fn() or {}
        except Failure as exc:
            self.fail(name, str(exc), t0)
        except sushy_exc.SushyError as exc:
            self.fail(name, "sushy raised %s: %s" % (type(exc).__name__, exc), t0)
        except Exception as exc:  # noqa: BLE001 - anything else is a failure too
            self.fail(name, "%s: %s\n%s" % (type(exc).__name__, exc, traceback.format_exc()), t0)
        problems = self.client_problems()
        out = {"step": name, "ok": True, "seconds": round(time.monotonic() - t0, 3)}
        out.update(detail)
        if problems:
            out["client_problems"] = problems
            if not self.args.lenient:
                out["ok"] = False
                self.emit(out)
                self.fail(name, "sushy tripped over the service's responses: %s"
                          % json.dumps(problems), t0, already_emitted=True)
            self.notes.extend(problems)
        self.emit(out)
        self.steps += 1

    def fail(self, name, message, t0, already_emitted=False):
        if not already_emitted:
            self.emit({"step": name, "ok": False, "seconds": round(time.monotonic() - t0, 3),
                       "error": message})
        sys.stderr.write("\nFAILED step %r: %s\n" % (name, message))
        sys.stderr.write("last HTTP exchanges (oldest first):\n")
        for ex in self.trace.exchanges[-20:]:
            sys.stderr.write("  %s\n" % json.dumps(ex))
        if self.recorder.records:
            sys.stderr.write("sushy warnings:\n")
            for rec in self.recorder.records:
                sys.stderr.write("  %s\n" % json.dumps(rec))
        self.emit({"result": "FAIL", "failed_step": name, "error": message,
                   "steps_passed": self.steps,
                   "seconds": round(time.monotonic() - self.started, 3)})
        sys.exit(1)

    def client_problems(self):
        """New sushy warnings and HTTP errors since the last step that are not expected."""
        problems = []
        for rec in self.recorder.records[self.seen_warnings:]:
            if not any(re.search(p, rec["message"]) for p in EXPECTED_WARNINGS + self.args.allow_warning):
                problems.append({"kind": "sushy-warning", **rec})
        self.seen_warnings = len(self.recorder.records)
        for ex in self.trace.exchanges[self.seen_exchanges:]:
            if ex["status"] >= 400 and not self.expected_http_error(ex):
                problems.append({"kind": "http-error", **ex})
        self.seen_exchanges = len(self.trace.exchanges)
        return problems

    @staticmethod
    def expected_http_error(ex):
        # The session login attempt of sushy's auto auth may fail: it then uses Basic auth.
        return ex["method"] == "POST" and ex["path"].rstrip("/").endswith("/SessionService/Sessions")

    def require(self, cond, message, *args):
        if not cond:
            raise Failure(message % args if args else message)

    # ---- helpers -----------------------------------------------------------------------

    def check_mapped(self, res, field, raw_path):
        """A field sushy maps onto an enumeration: None while the JSON has a value means sushy
        did not understand the value."""
        raw = res.json
        for p in raw_path:
            raw = raw.get(p, {}) if isinstance(raw, dict) else None
        mapped = field
        if raw not in (None, {}) and mapped is None:
            raise Failure("sushy could not map %s=%r of %s onto its enumeration"
                          % ("/".join(raw_path), raw, res.path))
        return raw

    def power(self):
        self.system.refresh()
        raw = self.check_mapped(self.system, self.system.power_state, ["PowerState"])
        return self.system.power_state, raw

    def wait_power(self, want_on, timeout=POWER_TIMEOUT):
        """Poll like Ironic's _wait_for_power_state: On/PoweringOn count as on, Off/PoweringOff
        as off. Then keep polling (same deadline) until the state settles on exactly On or Off,
        which is what a real BMC eventually reports."""
        on_states = {"On", "PoweringOn"}
        off_states = {"Off", "PoweringOff"}
        want = on_states if want_on else off_states
        final = "On" if want_on else "Off"
        t0 = time.monotonic()
        deadline = t0 + timeout
        seen = []
        ironic_at = None
        while True:
            time.sleep(POWER_POLL_INTERVAL)
            state, raw = self.power()
            s = val(state)
            if not seen or seen[-1] != s:
                seen.append(s)
            if ironic_at is None and s in want:
                ironic_at = round(time.monotonic() - t0, 3)
            if s == final:
                return {"ironic_sees_target_after_s": ironic_at,
                        "settled_after_s": round(time.monotonic() - t0, 3),
                        "states_seen": seen}
            if time.monotonic() > deadline:
                raise Failure("PowerState did not become %s within %ss (states seen: %s)"
                              % (final, timeout, seen))

    def reset(self, rt):
        allowed = self.system.get_allowed_reset_system_values()
        self.require(rt in allowed, "reset type %s is not advertised (allowed: %s)",
                     val(rt), sorted(val(a) for a in allowed))
        self.system.reset_system(rt)

    def boot(self):
        self.system.refresh()
        b = self.system.boot
        self.check_mapped(self.system, b.target, ["Boot", "BootSourceOverrideTarget"])
        self.check_mapped(self.system, b.enabled, ["Boot", "BootSourceOverrideEnabled"])
        self.check_mapped(self.system, b.mode, ["Boot", "BootSourceOverrideMode"])
        return val(b.target), val(b.enabled), val(b.mode)

    # ---- steps -------------------------------------------------------------------------

    def connect(self):
        conn = sushy_connector.Connector(self.args.base_url, verify=not self.args.insecure,
                                         response_callback=self.trace)
        # Default "auto" auth (SessionOrBasicAuth), built from username/password as Ironic does.
        self.root = sushy.Sushy(self.args.base_url + "/redfish/v1", username=self.args.user,
                                password=self.args.password, verify=not self.args.insecure,
                                connector=conn)
        login = [ex for ex in self.trace.exchanges
                 if ex["method"] == "POST" and ex["path"].rstrip("/").endswith("/Sessions")]
        auth = "unknown"
        if login:
            auth = "session" if login[-1]["status"] < 300 else "basic (session login answered %d)" % login[-1]["status"]
        self.require(self.root.redfish_version, "service root has no RedfishVersion")
        self.auth = auth
        return {"sushy": getattr(sushy, "__version__", "?"), "redfish_version": self.root.redfish_version,
                "auth": auth}

    def get_system(self):
        if self.args.system:
            self.system = self.root.get_system(self.args.system)
        else:
            # metal3's redfish_system_id "/redfish/v1/" (or none): the only member of Systems.
            self.system = self.root.get_system()
        s = self.system
        if self.args.system:
            self.require(s.path.rstrip("/") == self.args.system.rstrip("/"), "system path %s", s.path)
        self.require(s.identity == s.path.rstrip("/").rsplit("/", 1)[-1],
                     "Id %r does not match the system path %s", s.identity, s.path)
        self.require(s.manufacturer == "KubeVirt", "Manufacturer is %r, want 'KubeVirt'", s.manufacturer)
        self.require(s.uuid, "UUID is empty")
        try:
            uuidlib.UUID(s.uuid)
        except ValueError:
            raise Failure("UUID %r is not a UUID" % s.uuid)
        state, _ = self.power()
        target, enabled, mode = self.boot()
        return {"id": s.identity, "uuid": s.uuid, "manufacturer": s.manufacturer,
                "model": s.json.get("Model"), "power": val(state),
                "boot": {"target": target, "enabled": enabled, "mode": mode},
                "memory_gib": s.memory_summary.size_gib if s.memory_summary else None}

    def allowed_values(self):
        s = self.system
        resets = {val(v) for v in s.get_allowed_reset_system_values()}
        # Ironic's power and reboot paths.
        need = {"On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart"}
        self.require(need <= resets, "reset types %s missing from %s", sorted(need - resets), sorted(resets))
        raw_targets = s.boot.allowed_values
        self.require(raw_targets, "Boot/BootSourceOverrideTarget@Redfish.AllowableValues is missing or empty")
        targets = {val(v) for v in s.get_allowed_system_boot_source_values()}
        need_t = {"Pxe", "Hdd", "Cd"}
        self.require(need_t <= targets, "boot targets %s missing from %s", sorted(need_t - targets), sorted(targets))
        unknown = sorted(set(raw_targets) - targets)
        self.require(not unknown, "sushy does not know the advertised boot targets %s", unknown)
        return {"reset_types": sorted(resets), "boot_targets": sorted(targets)}

    def managers(self):
        mgrs = self.system.managers
        self.require(mgrs, "System has no Links.ManagedBy")
        out = []
        for m in mgrs:
            self.require(m.identity, "manager %s has no Id", m.path)
            info = {"path": m.path, "id": m.identity,
                    "type": val(getattr(m, "manager_type", None)),
                    "firmware": getattr(m, "firmware_version", None)}
            out.append(info)
        return {"managers": out}

    def chassis(self):
        ch = self.system.chassis
        self.require(ch, "System has no Links.Chassis")
        out = []
        for c in ch:
            self.require(c.identity, "chassis %s has no Id", c.path)
            out.append({"path": c.path, "id": c.identity,
                        "type": val(getattr(c, "chassis_type", None)),
                        "manufacturer": getattr(c, "manufacturer", None)})
        return {"chassis": out}

    def force_off_if_on(self):
        state, _ = self.power()
        if val(state) in ("Off",):
            return {"skipped": "already Off"}
        self.reset(sushy.RESET_FORCE_OFF)
        return self.wait_power(False)

    def set_mode(self, mode):
        def fn():
            before = self.boot()
            self.system.set_system_boot_options(mode=mode)
            # Ironic reads the mode right back; it must show at once.
            after = self.boot()
            self.require(after[2] == val(mode), "BootSourceOverrideMode is %r right after the PATCH, want %r",
                         after[2], val(mode))
            self.require(after[:2] == before[:2], "setting the mode changed the override: %s -> %s",
                         before[:2], after[:2])
            return {"mode_before": before[2], "mode_after": after[2]}
        return fn

    def set_boot(self, target, enabled):
        """Ironic's set_boot_device: checks the target against the allowed values (sushy does),
        sends BootSourceOverrideEnabled only when it changes, then reads the result back."""
        def fn():
            before = self.boot()
            send_enabled = enabled if before[1] != val(enabled) else None
            self.system.set_system_boot_options(target=target, enabled=send_enabled)
            t, e, m = self.boot()
            self.require((t, e) == (val(target), val(enabled)),
                         "after PATCH %s+%s the system shows %s+%s", val(target), val(enabled), t, e)
            self.require(m == before[2], "setting the override changed the mode %s -> %s", before[2], m)
            return {"before": list(before[:2]), "target": t, "enabled": e, "mode": m,
                    "sent_enabled": send_enabled is not None}
        return fn

    def power_on(self):
        self.reset(sushy.RESET_ON)
        return self.wait_power(True)

    def boot_becomes(self, target, enabled, what):
        def fn():
            t0 = time.monotonic()
            seen = []
            while True:
                t, e, _ = self.boot()
                if not seen or seen[-1] != [t, e]:
                    seen.append([t, e])
                if (t, e) == (target, enabled):
                    return {"after_s": round(time.monotonic() - t0, 3), "seen": seen}
                if time.monotonic() - t0 > ONCE_TIMEOUT:
                    raise Failure("%s: the override is not %s+%s within %ss (seen %s)"
                                  % (what, target, enabled, ONCE_TIMEOUT, seen))
                time.sleep(0.5)
        return fn

    def reset_and_wait(self, rt, want_on):
        def fn():
            self.reset(rt)
            # Recorded, not checked: a simulated boot may already be done by the time this GET
            # arrives, so a restart cannot be told from a no-op by PowerState alone. The
            # consumption of a Once override armed before the restart proves the new boot.
            now, _ = self.power()
            out = {"right_after_action": val(now)}
            out.update(self.wait_power(want_on))
            return out
        return fn

    def ironic_reboot(self):
        # Ironic's "reboot": ForceOff, wait for Off, On, wait for On.
        self.reset(sushy.RESET_FORCE_OFF)
        off = self.wait_power(False)
        self.reset(sushy.RESET_ON)
        on = self.wait_power(True)
        return {"off": off, "on": on}

    def inventory(self):
        """What Ironic's out-of-band inspection and deploy read besides power and boot. Gaps
        are reported as notes (and fail only with --require-inventory)."""
        s = self.system
        s.refresh()
        found, missing = {}, []

        def probe(name, res, link, fn):
            # A link that is absent is a gap (noted). A link that is present must load and
            # parse through sushy; anything else fails the step.
            if link not in res.json:
                missing.append({"what": name, "error": "%s has no %s" % (res.path, link)})
                return
            found[name] = fn()

        def processors():
            summary = s.processors.summary  # (count, architecture), what inspection reads
            return {"count": summary[0], "architecture": val(summary[1])}

        def nics():
            # Ironic makes a port of every member with a MACAddress and Status.State Enabled.
            macs = {mac: val(state) for mac, state in s.ethernet_interfaces.summary.items()}
            self.require(macs, "EthernetInterfaces has no member with a MACAddress")
            self.require(any(st == "Enabled" for st in macs.values()),
                         "no EthernetInterface is Enabled, Ironic would create no port: %s", macs)
            return {"macs": macs}

        def media(coll):
            out = []
            for vm in coll.get_members():
                types = [val(t) for t in (vm.media_types or [])]
                actions = vm.json.get("Actions", {})
                out.append({"id": vm.identity, "media_types": types, "inserted": vm.inserted,
                            "image": vm.image,
                            "insert_action": "#VirtualMedia.InsertMedia" in actions,
                            "eject_action": "#VirtualMedia.EjectMedia" in actions})
            # Ironic inserts into the first member whose MediaTypes contains CD (or DVD).
            self.require(any(set(m["media_types"]) & {"CD", "DVD"} for m in out),
                         "no virtual media member has MediaTypes CD or DVD: %s", out)
            return out

        probe("processors", s, "Processors", processors)
        probe("ethernet_interfaces", s, "EthernetInterfaces", nics)
        probe("simple_storage", s, "SimpleStorage", lambda: {"max_size_bytes": s.simple_storage.max_size_bytes})
        probe("storage", s, "Storage", lambda: {"max_drive_size_bytes": s.storage.max_drive_size_bytes,
                                                "max_volume_size_bytes": s.storage.max_volume_size_bytes})
        probe("secure_boot", s, "SecureBoot", lambda: {"enabled": s.secure_boot.enabled})
        probe("bios", s, "Bios", lambda: {"attributes": len(s.bios.attributes or {})})
        if hasattr(s, "virtual_media"):  # newer sushy reads System.VirtualMedia first
            probe("system_virtual_media", s, "VirtualMedia", lambda: media(s.virtual_media))
        for m in s.managers:
            # Ironic 21 (sushy 4.3) looks only under the Managers in Links.ManagedBy.
            probe("manager_virtual_media", m, "VirtualMedia", lambda m=m: media(m.virtual_media))
        if missing and self.args.require_inventory:
            raise Failure("inventory Ironic reads is missing: %s" % json.dumps(missing))
        if missing:
            self.notes.append({"kind": "inventory-missing", "missing": missing})
        return {"found": found, "missing": [m["what"] for m in missing]}

    def close(self):
        # Ironic drops its sushy client; with session auth, sushy DELETEs its session here.
        self.root = None
        self.system = None
        gc.collect()
        deletes = [ex for ex in self.trace.exchanges if ex["method"] == "DELETE"]
        if self.auth == "session":
            self.require(any(d["status"] < 300 for d in deletes),
                         "sushy logged in with a session but did not delete it: %s", deletes)
        return {"session_deletes": [(d["path"], d["status"]) for d in deletes]}

    def run(self):
        a = self.args
        self.step("connect", self.connect)
        self.step("get_system", self.get_system)
        self.step("allowed_values", self.allowed_values)
        self.step("managers", self.managers)
        self.step("chassis", self.chassis)
        self.step("force_off_if_on", self.force_off_if_on)
        self.step("set_boot_mode_legacy", self.set_mode(sushy.BOOT_SOURCE_MODE_BIOS))
        self.step("set_boot_mode_uefi", self.set_mode(sushy.BOOT_SOURCE_MODE_UEFI))
        # Deploy ramdisk from virtual media: Cd+Once, On; the boot consumes the override.
        self.step("set_boot_cd_once", self.set_boot(sushy.BOOT_SOURCE_TARGET_CD, sushy.BOOT_SOURCE_ENABLED_ONCE))
        self.step("power_on", self.power_on)
        self.step("once_consumed_by_boot", self.boot_becomes("None", "Disabled", "after power on"))
        # A Once override armed while running is consumed by the next boot: a restart.
        self.step("set_boot_pxe_once_while_on",
                  self.set_boot(sushy.BOOT_SOURCE_TARGET_PXE, sushy.BOOT_SOURCE_ENABLED_ONCE))
        self.step("force_restart", self.reset_and_wait(sushy.RESET_FORCE_RESTART, True))
        self.step("once_consumed_by_restart", self.boot_becomes("None", "Disabled", "after ForceRestart"))
        # After a deploy Ironic sets Hdd+Continuous and reboots (ForceOff, On): it must stay.
        self.step("set_boot_hdd_continuous",
                  self.set_boot(sushy.BOOT_SOURCE_TARGET_HDD, sushy.BOOT_SOURCE_ENABLED_CONTINUOUS))
        self.step("ironic_reboot", self.ironic_reboot)
        self.step("continuous_kept_after_reboot", self.boot_becomes("Hdd", "Continuous", "after reboot"))
        self.step("graceful_shutdown", self.reset_and_wait(sushy.RESET_GRACEFUL_SHUTDOWN, False))
        if not a.skip_inventory:
            self.step("inventory", self.inventory)
        self.step("close", self.close)
        self.emit({"result": "PASS", "steps_passed": self.steps,
                   "seconds": round(time.monotonic() - self.started, 3),
                   "notes": self.notes,
                   "sushy_warnings": self.recorder.records})


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-url", default=os.environ.get("KRF_BASE_URL"),
                   help="scheme://host[:port] of the service (env KRF_BASE_URL)")
    p.add_argument("--user", default=os.environ.get("KRF_USER"), help="(env KRF_USER)")
    p.add_argument("--password", default=os.environ.get("KRF_PASSWORD"), help="(env KRF_PASSWORD)")
    p.add_argument("--system", default=os.environ.get("KRF_SYSTEM", "/redfish/v1/Systems/tenant-a.cp-0"),
                   help="the system's path, as metal3 passes redfish_system_id; empty or /redfish/v1/ "
                        "for the only system the user sees (env KRF_SYSTEM)")
    p.add_argument("--insecure", action="store_true", help="do not verify the TLS certificate")
    p.add_argument("--lenient", action="store_true",
                   help="report, but do not fail on, sushy warnings and unexpected HTTP errors")
    p.add_argument("--allow-warning", action="append", default=[], metavar="REGEX",
                   help="a sushy warning that is expected (repeatable)")
    p.add_argument("--skip-inventory", action="store_true", help="skip the inventory probe")
    p.add_argument("--require-inventory", action="store_true",
                   help="fail when inventory Ironic reads (processors, NICs, disks, virtual media...) is missing")
    p.add_argument("-v", "--verbose", action="store_true", help="log sushy at DEBUG level to stderr")
    args = p.parse_args()
    for name in ("base_url", "user", "password"):
        if not getattr(args, name):
            p.error("--%s (or KRF_%s) is required" % (name.replace("_", "-"), name.upper()))
    args.base_url = args.base_url.rstrip("/")
    if args.system.rstrip("/") in ("", "/redfish/v1"):
        args.system = ""

    run = Run(args)
    log = logging.getLogger("sushy")
    log.setLevel(logging.DEBUG if args.verbose else logging.INFO)
    log.addHandler(run.recorder)
    # sushy also logs through the root logger in a few places (base.Field defaults).
    logging.getLogger().addHandler(run.recorder)
    if args.verbose:
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        log.addHandler(h)
    log.propagate = False
    run.run()


if __name__ == "__main__":
    main()
