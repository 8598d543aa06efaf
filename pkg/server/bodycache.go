package server

import (
	"encoding/json"
	"hash/maphash"
	"net/http"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// systemBodyCapacity bounds the ComputerSystem bodies kept: every system of a 16,000-VM fleet,
// at ~2.3 KB each (~40 MB at most). Beyond that the least recently read are rendered anew.
const systemBodyCapacity = 16384

// bodyCache keeps the encoded ComputerSystem of each machine read recently, with its ETag and
// Link header, for as long as the objects it was rendered from are unchanged. Installers poll
// every system's power state every few seconds, and a system changes far less often: a hit
// skips building the resource, encoding it and hashing it, more than half of a GET's handler
// time. A machine is rendered from its VM, its VMI and its Neighbours (for placement health),
// so the key is their identities and resourceVersions, read from the same cache
// objects the render would read: a hit is always what rendering now would give.
type bodyCache struct{ lru *lru.Cache }

type cachedBody struct {
	key        renderKey
	body       []byte
	etag, link string
}

// renderKey is what a ComputerSystem is rendered from. The neighbours, in the indexer's
// arbitrary order, are folded into an order-independent sum of hashes.
type renderKey struct {
	vm, vmi       types.UID
	vmRV, vmiRV   string
	neighbours    int
	neighbourHash uint64
}

var neighbourSeed = maphash.MakeSeed()

func newBodyCache() *bodyCache { return &bodyCache{lru: lru.New(systemBodyCapacity)} }

// renderKeyOf returns the key of m, or false when an object has no resourceVersion: without
// one, an object cannot be told apart from its next version (the apiserver always sets it;
// in-memory fakes may not).
func renderKeyOf(m kubevirt.Machine) (renderKey, bool) {
	k := renderKey{vm: m.VM.UID, vmRV: m.VM.ResourceVersion}
	if m.VMI == nil {
		return k, k.vmRV != ""
	}
	k.vmi, k.vmiRV = m.VMI.UID, m.VMI.ResourceVersion
	if k.vmRV == "" || k.vmiRV == "" {
		return k, false
	}
	for _, p := range m.Neighbours() {
		if p.ResourceVersion == "" {
			return k, false
		}
		k.neighbours++
		k.neighbourHash += maphash.Comparable(neighbourSeed, struct {
			uid types.UID
			rv  string
		}{p.UID, p.ResourceVersion})
	}
	return k, true
}

// writeSystem writes the ComputerSystem of m, from the cache when m is unchanged since it was
// last rendered.
func (c *bodyCache) writeSystem(w http.ResponseWriter, m kubevirt.Machine) {
	key, cacheable := renderKeyOf(m)
	if !cacheable {
		writeJSON(w, http.StatusOK, systemResource(m))
		return
	}
	id := m.ID()
	if v, ok := c.lru.Get(id); ok {
		if b := v.(*cachedBody); b.key == key {
			writePrepared(w, http.StatusOK, b.body, b.etag, b.link)
			return
		}
	}
	body, err := json.Marshal(systemResource(m))
	if err != nil {
		writeError(w, redfish.InternalError())
		return
	}
	b := &cachedBody{key: key, body: body, etag: etagOf(body), link: linkOf(body)}
	c.lru.Add(id, b)
	writePrepared(w, http.StatusOK, b.body, b.etag, b.link)
}
