#!/usr/bin/python3
"""Drive a kubevirt-redfish system through the real sushy library, the way Ironic does.

Usage:
    sushy_ironic.py --base-url http://127.0.0.1:8000 --user admin --password password \
        --system /redfish/v1/Systems/tenant-a.cp-0 [--flow power|vmedia|session|inspect] [--vmedia-via system|manager]

Every option can also come from the environment: KRF_BASE_URL, KRF_USER, KRF_PASSWORD,
KRF_SYSTEM, KRF_FLOW, KRF_VMEDIA_VIA, KRF_IMAGE_BASE_URL.

Flows:
 * power (default): power, boot mode, one-time and continuous boot overrides, restarts,
   inventory.
 * vmedia: the redfish-virtual-media boot interface: a ramdisk deploy (power off, eject every
   inserted CD/DVD, insert, Cd+Once, On, which must wait for the import, eject, Hdd+Continuous,
   reboot) and a live-ISO deploy (Cd+Continuous, the ISO stays inserted). --vmedia-via system
   finds the media as current Ironic does (System.VirtualMedia); --vmedia-via manager as
   Ironic 21 (Debian) does, only through the Managers in Links.ManagedBy: any request for the
   System's VirtualMedia collection then fails the run. The images come from
   --image-base-url, or from an HTTP server the script starts itself (--image-bind), which
   serves --image-size bytes slowly so that the import can be watched.
 * session: sushy's default auto auth with a service that offers sessions: one login
   (201 + X-Auth-Token), the token and no Authorization header on every later request; then
   the script POSTs to --session-callback, whose owner ends the session on the server side,
   and the next System.refresh() must go GET 401, one new login, the same GET 200 with the new
   token; closing sushy DELETEs the new session and both tokens are dead. --exchange-log FILE
   gets every exchange (tokens as SHA-256 prefixes), the retry included.

 * inspect: Ironic's out-of-band inspection (the redfish inspect interface, Ironic 21 and
   current): memory, CPUs (the processors' summary and each member), local_gb (the smallest
   disk of at least 4 GiB from SimpleStorage, Storage volumes or drives, less 1 GiB), the
   disks, NICs and system vendor of the inventory, the ports' MACs, the boot mode, BIOS
   version and attributes, the manager's firmware version and the indicator LED; then
   metal3's UEFISecureBoot: Ironic's set_secure_boot_state on and off (UEFI only).

The script prints one JSON line per step ({"step": ..., "ok": true, ...}) and a
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
set_system_boot_options(), get_allowed_*(), .managers, .chassis, Manager.virtual_media,
VirtualMedia.insert_media()/eject_media(), get_task_service() and the parsed fields, plus
the public `response_callback` of sushy.connector.Connector to trace the HTTP exchanges.
Three private bits: System.VirtualMedia is read with sushy's VirtualMediaCollection when the
installed sushy has no System.virtual_media (4.3.3 has not), the parsed action targets of a
VirtualMedia (`_actions`, which decide between the action and a PATCH) are checked, and the
Tasks collection is also read raw through the root's connector (`_conn`).
Written for sushy 4.x (Debian 12 ships 4.3.3) and newer.
"""

import argparse
import gc
import http.server
import json
import logging
import os
import re
import sys
import threading
import time
import traceback
import uuid as uuidlib

try:
    import sushy
    from sushy import connector as sushy_connector
    from sushy import exceptions as sushy_exc
    from sushy import utils as sushy_utils
    from sushy.resources.manager import virtual_media as sushy_vmedia
except ImportError as exc:  # pragma: no cover - reported to the Go test
    print(json.dumps({"result": "FAIL", "error": "cannot import sushy: %s "
                      "(install python3-sushy: apt-get install -y python3-sushy)" % exc}))
    sys.exit(2)

# Ironic's power polling: first look after 1 s, every 1 s, give up after 60 s.
POWER_POLL_INTERVAL = 1.0
POWER_TIMEOUT = 60.0
# How long a consumed Once override may take to show.
ONCE_TIMEOUT = 15.0
# InsertMedia must answer without waiting for the download (the service promises a second).
INSERT_MAX_SECONDS = 2.0
# How long a finished import may take to show as a Completed Task once the machine is On.
TASK_TIMEOUT = 10.0
# Ironic's redfish.boot_mode_config_timeout (default 900 s), shortened: how long it waits for a
# secure boot change to show after the reboot it does when the change does not show at once.
SECURE_BOOT_TIMEOUT = 60.0
GiB = 1 << 30

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
        if req.method in ("POST", "PATCH", "PUT"):
            entry["content_type"] = req.headers.get("Content-Type")
        if response.status_code >= 400:
            entry["response"] = response.text[:2000]
        self.exchanges.append(entry)


class ImageServer:
    """A slow HTTP server of fake ISO images: every path is an image of `size` bytes, sent in
    64 KiB chunks with `delay` seconds before each, so that an import takes a while. It runs in
    a thread of this process; whoever imports the image (the simulated CDI importer of the Go
    test, or a real one) must be able to reach `bind`."""

    CHUNK = 64 << 10

    def __init__(self, bind, size, delay):
        self.size, self.delay = size, delay
        self.lock = threading.Lock()
        self.sent = {}      # path -> body bytes sent
        self.requests = []  # (method, path)
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep stderr for the run's own report
                pass

            def do_HEAD(self):
                self.answer(body=False)

            def do_GET(self):
                self.answer(body=True)

            def answer(self, body):
                path = self.path.split("?", 1)[0]
                with outer.lock:
                    outer.requests.append((self.command, path))
                if path.endswith("/missing.iso"):
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(outer.size))
                self.end_headers()
                if not body:
                    return
                chunk = b"\0" * outer.CHUNK
                left = outer.size
                try:
                    while left > 0:
                        time.sleep(outer.delay)
                        n = min(left, len(chunk))
                        self.wfile.write(chunk[:n])
                        left -= n
                        with outer.lock:
                            outer.sent[path] = outer.sent.get(path, 0) + n
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the importer gave up (an eject cancels the import)

        self.httpd = http.server.ThreadingHTTPServer((bind, 0), Handler)
        self.httpd.daemon_threads = True
        host = bind if ":" not in bind else "[%s]" % bind
        self.url = "http://%s:%d" % (host, self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="image-server", daemon=True)
        self.thread.start()

    def stats(self):
        with self.lock:
            return {"url": self.url, "bytes_sent": dict(self.sent), "requests": len(self.requests)}

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


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
        # Paths no request may go to (see forbid()), and the image server the script runs.
        self.forbidden = []
        self.image_server = None
        self.image_base = None
        # Virtual media state of the vmedia flow: the member the last insert went to.
        self.media_path = None

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
            why = self.forbidden_reason(ex["path"])
            if why:
                problems.append({"kind": "forbidden-request", "why": why, **ex})
        self.seen_exchanges = len(self.trace.exchanges)
        return problems

    def forbid(self, path, why, prefix=False):
        """No request may go to path (or, with prefix, below it) from now on."""
        self.forbidden.append((path.rstrip("/"), prefix, why))

    def forbidden_reason(self, path):
        p = path.split("?", 1)[0].rstrip("/")
        for f, prefix, why in self.forbidden:
            if p == f or (prefix and p.startswith(f + "/")):
                return why
        return None

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

    # ---- out-of-band inspection (the redfish inspect interface, --flow inspect) --------

    def fresh_system(self):
        """Ironic gets the System anew for every task."""
        self.system = self.root.get_system(self.system.path)
        return self.system

    def inspect_memory(self):
        s = self.fresh_system()
        ms = s.memory_summary
        self.require(ms is not None and ms.size_gib, "MemorySummary.TotalSystemMemoryGiB is missing or 0: "
                     "Ironic would not set memory_mb")
        self.require(isinstance(ms.size_gib, (int, float)) and ms.size_gib > 0, "size_gib %r", ms.size_gib)
        return {"size_gib": ms.size_gib, "memory_mb": ms.size_gib * 1024}

    def inspect_processors(self):
        s = self.system
        procs = s.processors  # a missing Processors link makes Ironic 21 crash here
        self.require(procs is not None, "System has no Processors")
        count, arch = procs.summary
        self.require(count, "processors.summary count is %r: Ironic would not set cpus", count)
        self.require(arch is not None, "processors.summary architecture is None: Ironic would not set cpu_arch")
        # Ironic 21 maps ProcessorArchitecture, current Ironic the first member's InstructionSet.
        self.require(arch == sushy.PROCESSOR_ARCH_x86, "architecture %s, want x86 (cpu_arch x86_64)", val(arch))
        members = []
        threads = 0
        for p in procs.get_members():
            self.check_mapped(p, p.processor_architecture, ["ProcessorArchitecture"])
            self.check_mapped(p, p.instruction_set, ["InstructionSet"])
            self.check_mapped(p, p.processor_type, ["ProcessorType"])
            self.require(isinstance(p.total_threads, int) and p.total_threads > 0, "%s: TotalThreads %r",
                         p.path, p.total_threads)
            self.require(p.processor_architecture == sushy.PROCESSOR_ARCH_x86, "%s: ProcessorArchitecture %s",
                         p.path, val(p.processor_architecture))
            self.require(p.instruction_set == sushy.PROCESSOR_INSTRUCTIONSET_x86_64, "%s: InstructionSet %s, want "
                         "x86-64 (current Ironic's cpu architecture x86_64)", p.path, val(p.instruction_set))
            # Model is optional (the VM's CPU model when it names one); sushy must read it as sent.
            self.require(p.model == p.json.get("Model"), "%s: model %r, JSON %r", p.path, p.model, p.json.get("Model"))
            threads += p.total_threads
            members.append({"id": p.identity, "total_threads": p.total_threads, "total_cores": p.total_cores,
                            "processor_architecture": val(p.processor_architecture),
                            "instruction_set": val(p.instruction_set), "model": p.model,
                            "max_speed_mhz": p.max_speed_mhz})
        self.require(threads == count, "summary count %s is not the members' TotalThreads %s", count, threads)
        first = members[0]
        return {"count": count, "architecture": val(arch), "cpu_arch": "x86_64", "members": members,
                "inventory_cpu": {"count": count, "architecture": "x86_64", "model_name": first["model"],
                                  "frequency": first["max_speed_mhz"]}}

    @staticmethod
    def smallest_disk(sizes):
        """Ironic's pick among sizes: the first (sushy sorts them) of at least 4 GiB, else 0."""
        return ([n for n in (sizes or []) if n >= 4 * GiB] or [0])[0]

    def inspect_local_gb(self):
        """Ironic's _detect_local_gb: SimpleStorage disks, Storage volumes, else Storage drives;
        the smaller of the two sources when both have one; in GiB, less 1."""
        s = self.system
        simple = s.simple_storage.disks_sizes_bytes if s.simple_storage else []
        volumes = s.storage.volumes_sizes_bytes if s.storage else []
        drives = s.storage.drives_sizes_bytes if s.storage else []
        for name, sizes in (("SimpleStorage disks", simple), ("Storage volumes", volumes), ("Storage drives", drives)):
            self.require(all(isinstance(n, int) for n in sizes), "%s sizes %r", name, sizes)
        simple_size = self.smallest_disk(simple)
        storage_size = self.smallest_disk(volumes) or self.smallest_disk(drives)
        size = min(simple_size, storage_size) if simple_size and storage_size else max(simple_size, storage_size)
        local_gb = max(0, int(size / GiB - 1))
        self.require(local_gb > 0, "local_gb is 0: Ironic would take the node for disk-less "
                     "(SimpleStorage %s, volumes %s, drives %s)", simple, volumes, drives)
        # Current Ironic's inventory: the drives of each Storage (or the SimpleStorage devices).
        disks = []
        storages = s.storage or s.simple_storage
        for st in storages.get_members():
            for d in (st.drives if hasattr(st, "drives") else st.devices):
                disks.append({"name": d.name, "size": d.capacity_bytes})
        self.require(disks, "no disk in the inventory")
        return {"simple_storage_sizes": simple, "volume_sizes": volumes, "drive_sizes": drives,
                "chosen_bytes": size, "local_gb": local_gb, "inventory_disks": disks}

    def inspect_nics(self):
        """The ports Ironic creates: EthernetInterfaces members with a MAC in state Enabled."""
        s = self.system
        self.require(s.ethernet_interfaces is not None, "System has no EthernetInterfaces")
        summary = {mac: val(state) for mac, state in s.ethernet_interfaces.summary.items()}
        enabled = sorted(mac for mac, state in summary.items() if state == val(sushy.STATE_ENABLED))
        self.require(enabled, "no EthernetInterface is Enabled, Ironic would create no port: %s", summary)
        interfaces = []
        for eth in s.ethernet_interfaces.get_members():
            self.check_mapped(eth, eth.status.state if eth.status else None, ["Status", "State"])
            interfaces.append({"name": eth.identity, "mac_address": eth.mac_address})
        return {"summary": summary, "enabled_macs": enabled, "inventory_interfaces": interfaces}

    def inspect_system(self):
        """Boot mode capability, and the system vendor of current Ironic's inventory."""
        s = self.system
        target, enabled, mode = self.boot()
        self.require(mode in ("UEFI", "Legacy"), "Boot.BootSourceOverrideMode %r: Ironic maps UEFI and Legacy only", mode)
        self.require(s.manufacturer == "KubeVirt", "Manufacturer %r", s.manufacturer)
        self.check_mapped(s, s.system_type, ["SystemType"])
        # sushy 4.3 has no System.model (Ironic reads none; current Ironic's product_name is
        # the Name): read it from the JSON there.
        model = getattr(s, "model", None) if hasattr(s, "model") else s.json.get("Model")
        for field, value in (("Model", model), ("SerialNumber", s.serial_number), ("UUID", s.uuid)):
            self.require(value, "%s is empty", field)
        uuidlib.UUID(s.uuid)
        return {"boot_mode": {"UEFI": "uefi", "Legacy": "bios"}[mode], "manufacturer": s.manufacturer,
                "model": model, "model_from": "sushy" if hasattr(s, "model") else "json",
                "system_type": val(s.system_type), "serial_number": s.serial_number, "uuid": s.uuid,
                "system_vendor": {"product_name": s.name, "serial_number": s.serial_number,
                                  "manufacturer": s.manufacturer}}

    def inspect_firmware(self):
        s = self.system
        self.require(s.bios_version, "BiosVersion is empty")
        attrs = s.bios.attributes
        self.require(isinstance(attrs, dict) and attrs, "Bios.Attributes %r", attrs)
        mgr = s.managers[0]
        self.require(mgr.firmware_version, "%s has no FirmwareVersion", mgr.path)
        led = self.check_mapped(s, s.indicator_led, ["IndicatorLED"])
        self.require(led is not None, "IndicatorLED is absent")
        chassis = s.chassis[0]
        self.require(chassis.uuid == s.uuid, "%s: UUID %r, the system's is %r", chassis.path, chassis.uuid, s.uuid)
        return {"bios_version": s.bios_version, "bios_attributes": attrs, "manager_firmware_version":
                mgr.firmware_version, "indicator_led": val(s.indicator_led), "chassis_uuid": chassis.uuid}

    def secure_boot_read(self):
        sb = self.fresh_system().secure_boot
        self.require(isinstance(sb.enabled, bool), "SecureBootEnable %r", sb.enabled)
        self.check_mapped(sb, sb.mode, ["SecureBootMode"])
        self.check_mapped(sb, sb.current_boot, ["SecureBootCurrentBoot"])
        return {"enabled": sb.enabled, "mode": val(sb.mode), "current_boot": val(sb.current_boot)}

    def set_secure_boot(self, state):
        """Ironic's set_secure_boot_state, as metal3's UEFISecureBoot drives it: nothing when it
        already has the state; refused (by Ironic) in Legacy mode; PATCH SecureBootEnable; read
        it back; if it does not show, reboot (ForceOff, On) and wait, then restore the power."""
        def fn():
            s = self.fresh_system()
            sb = s.secure_boot
            if sb.enabled == state:
                return {"skipped": "already %s" % state}
            self.require(s.boot.mode != sushy.BOOT_SOURCE_MODE_BIOS, "boot mode is Legacy: Ironic refuses secure boot")
            sb.set_enabled(state)
            sb.refresh(force=True)
            out = {"shown_at_once": sb.enabled == state}
            if sb.enabled != state:
                before, _ = self.power()
                if val(before) != "Off":
                    self.reset(sushy.RESET_FORCE_OFF)
                    self.wait_power(False)
                self.reset(sushy.RESET_ON)
                self.wait_power(True)
                t0 = time.monotonic()
                while sb.enabled != state and time.monotonic() - t0 < SECURE_BOOT_TIMEOUT:
                    time.sleep(1)
                    sb.refresh(force=True)
                self.require(sb.enabled == state, "SecureBootEnable is still %r after the reboot", sb.enabled)
                out["rebooted"] = True
                if val(before) == "Off":
                    self.reset(sushy.RESET_FORCE_OFF)
                    self.wait_power(False)
            # A fresh System shows it too, and the boot mode stayed UEFI.
            s = self.fresh_system()
            self.require(s.secure_boot.enabled == state, "a fresh read shows SecureBootEnable %r", s.secure_boot.enabled)
            self.require(s.boot.mode == sushy.BOOT_SOURCE_MODE_UEFI, "boot mode is %s after the change", val(s.boot.mode))
            out.update({"enabled": s.secure_boot.enabled, "mode": val(s.secure_boot.mode)})
            return out
        return fn

    def reboot_applies_secure_boot(self, state):
        """Ironic's reboot (ForceOff, On); the new boot runs with secure boot as set."""
        def fn():
            out = self.ironic_reboot()
            sb = self.fresh_system().secure_boot
            want = "Enabled" if state else "Disabled"
            self.require(val(sb.current_boot) == want, "SecureBootCurrentBoot is %r after the reboot, want %s",
                         val(sb.current_boot), want)
            return {"current_boot": val(sb.current_boot), "enabled": sb.enabled, "mode": val(sb.mode),
                    "bios_secure_boot": self.system.bios.attributes.get("SecureBoot"), "reboot": out}
        return fn

    def run_inspect(self):
        self.step("connect", self.connect)
        self.step("get_system", self.get_system)
        self.step("inspect_memory", self.inspect_memory)
        self.step("inspect_processors", self.inspect_processors)
        self.step("inspect_local_gb", self.inspect_local_gb)
        self.step("inspect_nics", self.inspect_nics)
        self.step("inspect_system", self.inspect_system)
        self.step("inspect_firmware", self.inspect_firmware)
        self.step("secure_boot_read", self.secure_boot_read)
        # metal3's UEFISecureBoot: the node is in UEFI mode (set it, as Ironic does first).
        self.step("set_boot_mode_uefi", self.set_mode(sushy.BOOT_SOURCE_MODE_UEFI))
        self.step("secure_boot_on", self.set_secure_boot(True))
        self.step("secure_boot_off", self.set_secure_boot(False))
        # At the end of a deploy, with the agent running: set it, then the reboot into the
        # instance applies it (SecureBootCurrentBoot).
        self.step("power_on", self.power_on)
        self.step("secure_boot_on_while_on", self.set_secure_boot(True))
        self.step("reboot_into_secure_boot", self.reboot_applies_secure_boot(True))
        self.step("secure_boot_off_while_on", self.set_secure_boot(False))
        self.step("reboot_out_of_secure_boot", self.reboot_applies_secure_boot(False))
        self.step("force_off", self.force_off_if_on)
        self.step("close", self.close)
        self.emit({"result": "PASS", "steps_passed": self.steps,
                   "seconds": round(time.monotonic() - self.started, 3),
                   "notes": self.notes,
                   "sushy_warnings": self.recorder.records})

    # ---- virtual media (the redfish-virtual-media boot interface) ----------------------

    def image_url(self, name):
        return "%s/%s" % (self.image_base, name)

    def start_images(self):
        a = self.args
        if a.image_base_url:
            self.image_base = a.image_base_url.rstrip("/")
            return
        self.image_server = ImageServer(a.image_bind, a.image_size, a.image_chunk_delay)
        self.image_base = self.image_server.url

    def system_virtual_media(self, system):
        """System.VirtualMedia as current Ironic reads it. sushy gained System.virtual_media
        after 4.3 (Debian's 4.3.3 lacks it); then the collection is built from the System's
        VirtualMedia link with sushy's own VirtualMediaCollection, which is what the newer
        property does."""
        if isinstance(getattr(type(system), "virtual_media", None), property):
            return system.virtual_media
        path = sushy_utils.get_sub_resource_path_by(system, "VirtualMedia")
        return sushy_vmedia.VirtualMediaCollection(
            system._conn, path, redfish_version=system.redfish_version,
            registries=system.registries, root=system.root)

    def media_collections(self):
        """The VirtualMedia collections the configured Ironic generation uses, looked up afresh
        (Ironic gets the System anew for every virtual media operation)."""
        system = self.root.get_system(self.system.path)
        if self.args.vmedia_via == "system":
            # Current Ironic: System.VirtualMedia when the System has it, else the Managers.
            return [self.system_virtual_media(system)]
        # Ironic 21: only the Managers in Links.ManagedBy.
        return [m.virtual_media for m in system.managers]

    def media_members(self):
        """Every virtual media member, as (member, media types), checked for what sushy maps."""
        out = []
        for coll in self.media_collections():
            for vm in coll.get_members():
                raw = vm.json.get("MediaTypes") or []
                types = [val(t) for t in (vm.media_types or [])]
                self.require(len(types) == len(raw), "sushy could not map MediaTypes %r of %s (got %r)",
                             raw, vm.path, types)
                self.check_mapped(vm, vm.connected_via, ["ConnectedVia"])
                self.check_mapped(vm, vm.transfer_method, ["TransferMethod"])
                out.append((vm, types))
        return out

    @staticmethod
    def is_cd(types):
        # Newer Ironic also takes a DVD-only drive when it looks for a CD.
        return bool({"CD", "DVD"} & set(types))

    def media_at(self, path):
        for vm, types in self.media_members():
            if vm.path == path:
                return vm
        raise Failure("the virtual media member %s is no longer listed" % path)

    def find_virtual_media(self):
        s = self.system
        sys_link = (s.json.get("VirtualMedia") or {}).get("@odata.id")
        if self.args.vmedia_via == "manager":
            # Ironic 21 never looks at System.VirtualMedia: no request may go there.
            if sys_link:
                self.forbid(sys_link, "Ironic 21 finds virtual media only through the Managers",
                            prefix=self.args.strict_manager_paths)
        else:
            self.require(sys_link, "System %s has no VirtualMedia link (current Ironic would fall back "
                         "to the Managers)", s.path)
        colls = []
        for coll in self.media_collections():
            members = []
            for vm in coll.get_members():
                actions = vm._actions
                insert = actions.insert_media.target_uri if actions and actions.insert_media else None
                eject = actions.eject_media.target_uri if actions and actions.eject_media else None
                members.append({"path": vm.path, "id": vm.identity,
                                "media_types": [val(t) for t in (vm.media_types or [])],
                                "inserted": vm.inserted, "image": vm.image,
                                "insert_target": insert, "eject_target": eject})
                if not vm.path.startswith(coll.path.rstrip("/") + "/"):
                    self.notes.append({"kind": "media-member-outside-collection", "collection": coll.path,
                                       "member": vm.path})
            colls.append({"collection": coll.path, "members": members})
        cds = [m for c in colls for m in c["members"] if self.is_cd(m["media_types"])]
        self.require(cds, "no virtual media member with MediaTypes CD or DVD under %s",
                     [c["collection"] for c in colls])
        for m in cds:
            # sushy would PATCH the member instead when an action is missing (and fail without
            # PATCH in Allow): this service offers the actions.
            self.require(m["insert_target"] and m["eject_target"],
                         "%s has no InsertMedia/EjectMedia action target", m["path"])
        return {"via": self.args.vmedia_via, "collections": colls}

    def leftover_media(self):
        """A node that still holds the media of an earlier deploy, so that the eject-all below
        really ejects something."""
        url = self.image_url("previous-deploy.iso")
        for vm, types in self.media_members():
            if self.is_cd(types) and not vm.inserted:
                vm.insert_media(url, inserted=True, write_protected=True)
                return {"member": vm.path, "image": url}
        raise Failure("no empty CD/DVD member to insert into")

    def eject_all_cd(self):
        """Ironic's _eject_vmedia for CDs: eject every CD/DVD member that is inserted. sushy
        POSTs EjectMedia with no body (and retries with {} on 400/415)."""
        ejected = []
        for vm, types in self.media_members():
            if not self.is_cd(types) or not vm.inserted:
                continue
            was = vm.image
            n = len(self.trace.exchanges)
            vm.eject_media()
            posts = [ex for ex in self.trace.exchanges[n:] if ex["method"] == "POST"]
            self.require(len(posts) == 1, "EjectMedia took %d POSTs (sushy retries with {} after a 400/415): %s",
                         len(posts), posts)
            self.require(posts[0]["status"] < 300, "EjectMedia answered %s", posts[0])
            ejected.append({"member": vm.path, "image": was, "post": posts[0]["path"],
                            "body": posts[0].get("request"), "content_type": posts[0].get("content_type"),
                            "status": posts[0]["status"]})
        # Ironic does not read back after ejecting; the next insert does. Check it at once.
        left = [(vm.path, vm.image) for vm, types in self.media_members() if self.is_cd(types) and vm.inserted]
        self.require(not left, "still inserted right after the eject: %s", left)
        return {"ejected": ejected}

    def insert(self, name):
        """Ironic's _insert_vmedia: the first CD member; skip when it already holds the URL,
        pass over members holding something else."""
        def fn():
            url = self.image_url(name)
            for vm, types in self.media_members():
                if not self.is_cd(types):
                    continue
                if vm.inserted:
                    if vm.image == url:
                        raise Failure("%s already holds %s before the insert" % (vm.path, url))
                    continue
                n = len(self.trace.exchanges)
                t0 = time.monotonic()
                vm.insert_media(url, inserted=True, write_protected=True)
                took = time.monotonic() - t0
                posts = [ex for ex in self.trace.exchanges[n:] if ex["method"] in ("POST", "PATCH")]
                self.require(took <= INSERT_MAX_SECONDS, "InsertMedia took %.2fs: it must not wait for the "
                             "download", took)
                self.media_path = vm.path
                return {"member": vm.path, "image": url, "answered_after_s": round(took, 3),
                        "sent": [{"method": p["method"], "path": p["path"], "body": p.get("request"),
                                  "status": p["status"]} for p in posts]}
            raise Failure("no suitable virtual media device: no empty CD/DVD member")
        return fn

    def media_shown(self, name):
        """Re-read at once: Image is the URL and Inserted is true (the import has hardly begun)."""
        def fn():
            url = self.image_url(name)
            vm = self.media_at(self.media_path)
            self.require(vm.image == url, "Image is %r right after InsertMedia, want %r", vm.image, url)
            self.require(vm.inserted is True, "Inserted is %r right after InsertMedia", vm.inserted)
            self.require(vm.write_protected is not False, "WriteProtected is %r", vm.write_protected)
            return {"image": vm.image, "image_name": vm.image_name, "inserted": vm.inserted,
                    "write_protected": vm.write_protected, "connected_via": val(vm.connected_via),
                    "transfer_method": val(vm.transfer_method), "state": val(vm.status.state) if vm.status else None}
        return fn

    def power_on_waits_for_import(self):
        """On while the import runs: Ironic takes PoweringOn as on and carries on; the machine
        must show PoweringOn until the image is in, then On."""
        self.reset(sushy.RESET_ON)
        now, _ = self.power()
        out = {"right_after_action": val(now)}
        out.update(self.wait_power(True))
        seen = [val(now)] + out["states_seen"]
        self.require("PoweringOn" in seen, "PowerState never showed PoweringOn while the image was imported "
                     "(states seen: %s)", seen)
        return out

    def task_completed(self, name):
        """The import shows as a Task in TaskService: Completed, 100 %, once the machine is On.
        Read through sushy's TaskService and, raw, through its connector."""
        def fn():
            url = self.image_url(name)
            t0 = time.monotonic()
            while True:
                raw = self.root._conn.get("/redfish/v1/TaskService/Tasks").json()
                ts = self.root.get_task_service()
                found = []
                for task in ts.tasks.get_members():
                    if url not in json.dumps(task.json):
                        continue
                    self.check_mapped(task, task.task_state, ["TaskState"])
                    self.check_mapped(task, task.task_status, ["TaskStatus"])
                    found.append({"path": task.path, "name": task.name, "state": val(task.task_state),
                                  "status": val(task.task_status), "percent": task.percent_complete,
                                  "start": task.start_time, "end": task.end_time})
                done = [f for f in found if f["state"] == "Completed"]
                if done:
                    self.require(done[0]["percent"] == 100, "a Completed task is at %s%%", done[0]["percent"])
                    return {"tasks": found, "collection_members": raw.get("Members@odata.count"),
                            "after_s": round(time.monotonic() - t0, 3)}
                if time.monotonic() - t0 > TASK_TIMEOUT:
                    raise Failure("no Completed task for %s within %ss (found %s)" % (url, TASK_TIMEOUT, found))
                time.sleep(0.5)
        return fn

    def media_state(self, name, what):
        """The member of the last insert holds the image name (with None: nothing)."""
        def fn():
            vm = self.media_at(self.media_path)
            if name is None:
                self.require(not vm.inserted, "%s: still inserted (%r)", what, vm.image)
                self.require(not vm.image, "%s: Image is %r after the eject", what, vm.image)
            else:
                url = self.image_url(name)
                self.require(vm.inserted is True and vm.image == url, "%s: Inserted=%r Image=%r, want %r",
                             what, vm.inserted, vm.image, url)
            return {"inserted": vm.inserted, "image": vm.image}
        return fn

    def eject_after_deploy(self):
        # The deploy is done and the agent still runs: Ironic ejects, then reads nothing back.
        out = self.eject_all_cd()
        self.require(len(out["ejected"]) == 1, "ejected %s, want the ramdisk only", out["ejected"])
        out.update(self.media_state(None, "after the eject")())
        return out

    def kept(self, name, target, enabled, what):
        def fn():
            out = self.boot_becomes(target, enabled, what)()
            out.update(self.media_state(name, what)())
            state, _ = self.power()
            self.require(val(state) == "On", "%s: PowerState %s", what, val(state))
            return out
        return fn

    def teardown(self):
        # Ironic's tear down of a live-ISO node: power off, eject.
        off = self.force_off_if_on()
        ej = self.eject_all_cd()
        self.require(len(ej["ejected"]) == 1, "ejected %s, want the live ISO", ej["ejected"])
        return {"power_off": off, "ejected": ej["ejected"]}

    def vmedia_paths(self):
        """Which resources the flow touched for virtual media, and that it kept to its path."""
        media = sorted({ex["method"] + " " + ex["path"] for ex in self.trace.exchanges
                        if "VirtualMedia" in ex["path"]})
        bad = [ex for ex in self.trace.exchanges if self.forbidden_reason(ex["path"])]
        self.require(not bad, "requests went where this Ironic generation never goes: %s", bad)
        out = {"via": self.args.vmedia_via, "media_requests": media,
               "forbidden": [f[0] + ("/*" if f[1] else "") for f in self.forbidden]}
        if self.image_server:
            out["image_server"] = self.image_server.stats()
        return out

    # ---- session auth (--flow session) -------------------------------------------------
    #
    # sushy's default "auto" auth against a service that offers sessions: one login, the
    # token on every later request, and after the service ends the session (logout through
    # the API, the session's Secret deleted, an idle expiry: whatever the Go test chose) a 401,
    # one new login and one retry of the failed request. The exchanges are watched through a
    # response hook on sushy's requests.Session (the private Connector._session), because the
    # retry sushy sends after a re-login bypasses its response_callback. Tokens are never
    # printed or written: only the first 16 hex digits of their SHA-256 (the service stores
    # the SHA-256, and labels the session Secret with its first 32 digits).

    @staticmethod
    def token_id(token):
        import hashlib
        return hashlib.sha256(token.encode()).hexdigest()[:16]

    def session_hook(self, response, *args, **kwargs):
        """Records one exchange of sushy's HTTP session (a requests response hook)."""
        req = response.request
        tok = req.headers.get("X-Auth-Token")
        authz = req.headers.get("Authorization")
        entry = {
            "method": req.method,
            "path": re.sub(r"^https?://[^/]+", "", req.url),
            "status": response.status_code,
            "x_auth_token": self.token_id(tok) if tok else None,
            # Only the scheme ("Basic"), never the credentials.
            "authorization": authz.split(" ", 1)[0] if authz else None,
        }
        new = response.headers.get("X-Auth-Token")
        if new:
            entry["new_token"] = self.token_id(new)
            self.session_tokens[entry["new_token"]] = new
        if response.headers.get("Location"):
            entry["location"] = re.sub(r"^https?://[^/]+", "", response.headers["Location"])
        if response.status_code >= 400:
            entry["response"] = response.text[:1000]
        self.session_log_entry(entry)

    def session_log_entry(self, entry):
        self.session_log.append(entry)
        if self.args.exchange_log:
            with open(self.args.exchange_log, "a") as f:
                f.write(json.dumps(entry) + "\n")

    @staticmethod
    def is_login(ex):
        return ex.get("method") == "POST" and ex["path"].rstrip("/").endswith("/SessionService/Sessions")

    def exchanges_since(self, n):
        return [e for e in self.session_log[n:] if "method" in e]

    @staticmethod
    def brief(exchanges):
        return ["%s %s %s token=%s auth=%s" % (e["method"], e["path"], e["status"], e["x_auth_token"],
                                              e["authorization"]) for e in exchanges]

    def require_login(self, ex, old=None):
        """ex is a successful session login, sent without credentials headers; old is the
        session it replaces."""
        self.require(self.is_login(ex), "expected a POST to the Sessions collection, got %s", self.brief([ex]))
        self.require(ex["status"] == 201, "the login POST answered %d: %s", ex["status"], ex.get("response"))
        self.require(ex["x_auth_token"] is None and ex["authorization"] is None,
                     "the login POST carried credentials headers: %s", self.brief([ex]))
        self.require(ex.get("new_token"), "the login's 201 has no X-Auth-Token")
        self.require(ex.get("location"), "the login's 201 has no Location")
        if old:
            self.require(ex["new_token"] != old["token"], "the new login returned the old token")
            self.require(ex["location"] != old["location"], "the new login returned the old session %s",
                         old["location"])
        return {"token": ex["new_token"], "location": ex["location"]}

    def require_token(self, exchanges, token, what):
        """Every exchange is a success that carried exactly the session token."""
        bad = [e for e in exchanges
               if e["x_auth_token"] != token or e["authorization"] is not None
               or e["status"] >= 400 or self.is_login(e)]
        self.require(not bad, "%s: requests without the session token %s, with an Authorization header, "
                     "failed or logging in again: %s", what, token, self.brief(bad))

    def session_connect(self):
        conn = sushy_connector.Connector(self.args.base_url, verify=not self.args.insecure,
                                         response_callback=self.trace)
        conn._session.hooks["response"].append(self.session_hook)
        self.root = sushy.Sushy(self.args.base_url + "/redfish/v1", username=self.args.user,
                                password=self.args.password, verify=not self.args.insecure,
                                connector=conn)
        ex = self.exchanges_since(0)
        self.require(len(ex) == 2, "sushy's connect sent %s; want GET /redfish/v1/ and one login",
                     self.brief(ex))
        root, login = ex
        self.require((root["method"], root["path"].rstrip("/"), root["status"]) == ("GET", "/redfish/v1", 200),
                     "first exchange %s, want GET /redfish/v1/ 200", self.brief([root]))
        self.require(root["x_auth_token"] is None and root["authorization"] is None,
                     "the service root was read with credentials: %s", self.brief([root]))
        links = self.root.json.get("Links", {}).get("Sessions", {}).get("@odata.id")
        self.require(links and login["path"].rstrip("/") == links.rstrip("/"),
                     "sushy logged in at %s, Links.Sessions is %r", login["path"], links)
        self.sess = self.require_login(login)
        self.auth = "session"
        self.login_at = len(self.session_log)
        return {"sushy": getattr(sushy, "__version__", "?"), "auth": self.auth,
                "session": self.sess["location"], "token": self.sess["token"]}

    def token_reused(self):
        ex = self.exchanges_since(self.login_at)
        self.require(len(ex) >= 3, "only %d requests after the login", len(ex))
        self.require_token(ex, self.sess["token"], "before the session ended")
        logins = [e for e in self.exchanges_since(0) if self.is_login(e)]
        self.require(len(logins) == 1, "%d logins, want 1", len(logins))
        return {"requests_with_token": len(ex), "logins": len(logins)}

    def session_ended_by_server(self):
        """Asks the Go test (--session-callback) to end the session on the server side; it
        answers once the service rejects the session."""
        import urllib.error
        import urllib.request
        url = self.args.session_callback
        self.require(url, "--flow session needs --session-callback URL: a service that ends the session")
        n = len(self.session_log)
        body = json.dumps({"session": self.sess["location"], "token": self.sess["token"],
                           "user": self.args.user}).encode()
        req = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        t0 = time.monotonic()
        try:
            with opener.open(req, timeout=self.args.session_callback_timeout) as r:
                raw = r.read()
        except urllib.error.HTTPError as exc:
            raise Failure("the session callback answered %d: %s"
                          % (exc.code, exc.read()[:2000].decode("utf-8", "replace")))
        except OSError as exc:
            raise Failure("the session callback %s failed: %s" % (url, exc))
        try:
            answer = json.loads(raw or b"{}")
        except ValueError:
            answer = raw.decode("utf-8", "replace")[:2000]
        self.require(len(self.session_log) == n, "sushy sent requests while the callback ran")
        self.session_log_entry({"event": "session_ended_by_server", "session": self.sess["location"],
                                "callback": answer})
        self.ended_at = len(self.session_log)
        return {"waited_s": round(time.monotonic() - t0, 3), "callback": answer}

    def relogin_after_401(self):
        old = self.sess
        # The next thing Ironic would do: read the system.
        self.system.refresh()
        ex = self.exchanges_since(self.ended_at)
        path = self.system.path
        # Then System.refresh() reloads what it had cached (the Managers it links), with the new
        # token.
        self.require(len(ex) >= 3, "after the session ended, System.refresh() sent %s; want GET 401, "
                     "login 201, GET 200 with the new token", self.brief(ex))
        first, login, retry = ex[:3]
        self.require((first["method"], first["path"], first["status"], first["x_auth_token"]) ==
                     ("GET", path, 401, old["token"]),
                     "first exchange %s, want GET %s 401 with the ended session's token %s",
                     self.brief([first]), path, old["token"])
        self.require(first["authorization"] is None, "the GET carried an Authorization header")
        self.sess = self.require_login(login, old)
        self.require((retry["method"], retry["path"], retry["status"], retry["x_auth_token"],
                      retry["authorization"]) == ("GET", path, 200, self.sess["token"], None),
                     "retry %s, want GET %s 200 with the new token %s only",
                     self.brief([retry]), path, self.sess["token"])
        self.require_token(ex[3:], self.sess["token"], "the rest of System.refresh()")
        # sushy parsed the retried response (it does not check its status itself).
        self.require(self.system.identity == path.rstrip("/").rsplit("/", 1)[-1],
                     "after the retry the system's Id is %r", self.system.identity)
        state = self.check_mapped(self.system, self.system.power_state, ["PowerState"])
        # The 401 was expected: sushy recovered from it. Nothing else failed (checked above).
        self.seen_exchanges = len(self.trace.exchanges)
        self.relogin_at = len(self.session_log)
        return {"sequence": self.brief(ex), "old_session": old["location"], "new_session": self.sess["location"],
                "power": state}

    def new_token_reused(self):
        system = self.root.get_system(self.system.path)
        system.refresh()
        self.require(system.managers, "System has no Links.ManagedBy")
        ex = self.exchanges_since(self.relogin_at)
        self.require(ex, "no requests")
        self.require_token(ex, self.sess["token"], "after the re-login")
        self.closing_at = len(self.session_log)
        return {"requests_with_token": len(ex)}

    def session_logged_out(self):
        import requests
        ex = self.exchanges_since(self.closing_at)
        self.require(len(ex) == 1, "closing sushy sent %s; want one DELETE of its session", self.brief(ex))
        d = ex[0]
        self.require((d["method"], d["path"], d["x_auth_token"], d["authorization"]) ==
                     ("DELETE", self.sess["location"], self.sess["token"], None),
                     "closing sushy sent %s; want DELETE %s with its token", self.brief(ex), self.sess["location"])
        self.require(d["status"] in (200, 204), "the logout answered %d: %s", d["status"], d.get("response"))
        # Both tokens are dead now.
        dead = {}
        for tid, tok in self.session_tokens.items():
            r = requests.get(self.args.base_url + self.args.system if self.args.system
                             else self.args.base_url + "/redfish/v1/Systems",
                             headers={"X-Auth-Token": tok, "OData-Version": "4.0"},
                             verify=not self.args.insecure, proxies={"http": None, "https": None},
                             timeout=30)
            dead[tid] = r.status_code
        self.require(all(c == 401 for c in dead.values()), "ended tokens still answered: %s", dead)
        logins = [e for e in self.exchanges_since(0) if self.is_login(e)]
        self.require(len(logins) == 2, "%d logins in the whole run, want 2", len(logins))
        return {"logout": [d["path"], d["status"]], "tokens_rejected": dead, "logins": len(logins)}

    def run_session(self):
        self.session_log = []
        self.session_tokens = {}
        if self.args.exchange_log:
            open(self.args.exchange_log, "w").close()
        self.step("session_connect", self.session_connect)
        self.step("get_system", self.get_system)
        self.step("managers", self.managers)
        self.step("token_reused", self.token_reused)
        self.step("session_ended_by_server", self.session_ended_by_server)
        self.step("relogin_after_401", self.relogin_after_401)
        self.step("new_token_reused", self.new_token_reused)
        self.step("close", self.close)
        self.step("session_logged_out", self.session_logged_out)
        self.emit({"result": "PASS", "steps_passed": self.steps,
                   "seconds": round(time.monotonic() - self.started, 3),
                   "notes": self.notes,
                   "sushy_warnings": self.recorder.records})

    def run_vmedia(self):
        self.start_images()
        self.step("connect", self.connect)
        self.step("get_system", self.get_system)
        self.step("managers", self.managers)
        self.step("find_virtual_media", self.find_virtual_media)
        # Ramdisk deploy: prepare_ramdisk (power off, eject, insert, Cd+Once), then On.
        self.step("leftover_media", self.leftover_media)
        self.step("force_off_if_on", self.force_off_if_on)
        self.step("eject_all_cd", self.eject_all_cd)
        self.step("insert_ramdisk", self.insert("ironic-ramdisk.iso"))
        self.step("ramdisk_shown_at_once", self.media_shown("ironic-ramdisk.iso"))
        self.step("set_boot_cd_once", self.set_boot(sushy.BOOT_SOURCE_TARGET_CD, sushy.BOOT_SOURCE_ENABLED_ONCE))
        self.step("power_on_waits_for_import", self.power_on_waits_for_import)
        self.step("once_consumed_by_boot", self.boot_becomes("None", "Disabled", "after power on"))
        self.step("ramdisk_import_task_completed", self.task_completed("ironic-ramdisk.iso"))
        # End of the deploy: clean_up_ramdisk ejects, prepare_instance sets Hdd+Continuous, reboot.
        self.step("eject_after_deploy", self.eject_after_deploy)
        self.step("set_boot_hdd_continuous",
                  self.set_boot(sushy.BOOT_SOURCE_TARGET_HDD, sushy.BOOT_SOURCE_ENABLED_CONTINUOUS))
        self.step("ironic_reboot", self.ironic_reboot)
        self.step("disk_boot_kept_after_reboot", self.kept(None, "Hdd", "Continuous", "after the reboot"))
        # Live ISO (ramdisk deploy interface): power off, eject, insert, Cd+Continuous, On.
        self.step("live_force_off", self.force_off_if_on)
        self.step("live_eject_all_cd", self.eject_all_cd)
        self.step("insert_live_iso", self.insert("live.iso"))
        self.step("live_iso_shown_at_once", self.media_shown("live.iso"))
        self.step("set_boot_cd_continuous",
                  self.set_boot(sushy.BOOT_SOURCE_TARGET_CD, sushy.BOOT_SOURCE_ENABLED_CONTINUOUS))
        self.step("live_power_on_waits_for_import", self.power_on_waits_for_import)
        self.step("live_iso_kept", self.kept("live.iso", "Cd", "Continuous", "after power on"))
        self.step("live_reboot", self.ironic_reboot)
        self.step("live_iso_kept_after_reboot", self.kept("live.iso", "Cd", "Continuous", "after the reboot"))
        self.step("live_import_task_completed", self.task_completed("live.iso"))
        self.step("teardown", self.teardown)
        self.step("vmedia_paths", self.vmedia_paths)
        self.step("close", self.close)
        self.emit({"result": "PASS", "steps_passed": self.steps,
                   "seconds": round(time.monotonic() - self.started, 3),
                   "notes": self.notes,
                   "sushy_warnings": self.recorder.records})
        if self.image_server:
            self.image_server.stop()

    def run(self):
        a = self.args
        if a.flow == "vmedia":
            return self.run_vmedia()
        if a.flow == "session":
            return self.run_session()
        if a.flow == "inspect":
            return self.run_inspect()
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
    p.add_argument("--flow", choices=("power", "vmedia", "session", "inspect"), default=os.environ.get("KRF_FLOW", "power"),
                   help="power: power and boot overrides; vmedia: Ironic's virtual media deploys; "
                        "session: session auth, token reuse and re-login after the session ends; "
                        "inspect: Ironic's out-of-band inspection and secure boot (env KRF_FLOW)")
    p.add_argument("--session-callback", metavar="URL",
                   help="--flow session: URL the script POSTs {session, token (a hash prefix), user} to when "
                        "the service should end sushy's session; it answers 2xx once the session is dead")
    p.add_argument("--session-callback-timeout", type=float, default=120.0,
                   help="seconds to wait for the --session-callback answer")
    p.add_argument("--exchange-log", metavar="FILE",
                   help="--flow session: write every HTTP exchange sushy makes to FILE, one JSON line each "
                        "(tokens as SHA-256 prefixes)")
    p.add_argument("--vmedia-via", choices=("system", "manager"), default=os.environ.get("KRF_VMEDIA_VIA", "system"),
                   help="where the vmedia flow finds the media: system = current Ironic (System.VirtualMedia); "
                        "manager = Ironic 21, only through the Managers, never the System's collection "
                        "(env KRF_VMEDIA_VIA)")
    p.add_argument("--strict-manager-paths", action="store_true",
                   help="with --vmedia-via manager, forbid every request below the System's VirtualMedia "
                        "collection too, not only the collection itself")
    p.add_argument("--image-base-url", default=os.environ.get("KRF_IMAGE_BASE_URL"),
                   help="base URL the vmedia flow appends image names to; without it the script serves "
                        "the images itself (env KRF_IMAGE_BASE_URL)")
    p.add_argument("--image-bind", default="127.0.0.1",
                   help="address of the script's own image server; the importer must reach it")
    p.add_argument("--image-size", type=int, default=4 << 20, help="bytes of each served image")
    p.add_argument("--image-chunk-delay", type=float, default=0.06,
                   help="seconds before each 64 KiB chunk the script's image server sends")
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
