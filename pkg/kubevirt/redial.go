package kubevirt

import (
	"net/http"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// RetryWatches keeps a watch request dialling, every watchRedial, while the apiserver refuses
// connections, instead of failing it: client-go's reflectors back off exponentially (up to a
// minute, with jitter) after a refused watch, which after an apiserver restart would leave
// the caches, and so every GET and session lookup, stale for that long. Every other request
// still fails at once, so actions answer 503 without waiting.
func RetryWatches(next http.RoundTripper) http.RoundTripper { return watchRedialer{next} }

const watchRedial = 500 * time.Millisecond

type watchRedialer struct{ next http.RoundTripper }

func (w watchRedialer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.URL.Query().Get("watch") != "true" {
		return w.next.RoundTrip(req)
	}
	for {
		resp, err := w.next.RoundTrip(req)
		if err == nil || !utilnet.IsConnectionRefused(err) {
			return resp, err
		}
		select {
		case <-req.Context().Done():
			return nil, err
		case <-time.After(watchRedial):
		}
	}
}
