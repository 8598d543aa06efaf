package integration

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/config"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/sim/simtest"
	"github.com/kubevirt-redfish/kubevirt-redfish/test/stack"
)

// media.insecureTLS: the certificate an HTTPS image server presents is read at InsertMedia and
// becomes the one CDI's import trusts, in a ConfigMap that goes with the image cache. A
// namespace without the option still refuses the unknown authority, and a server whose
// certificate cannot be read is refused at once.
func TestInsecureTLSTrustsThePresentedCertificate(t *testing.T) {
	cfg := stack.Config(t)
	cfg.Media.Namespaces = map[string]config.Storage{"tenant-a": {InsecureTLS: true}}
	s := stack.Start(t, stack.Options{Config: cfg, CacheRetention: 2 * time.Second})
	c := client(t, s.URL, stack.Admin)
	srv := httptest.NewUnstartedServer(simtest.ImageHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	url := srv.URL + "/img/selfsigned.iso?size=300000"

	insert(t, c, "tenant-a.cp-1", url)
	insert(t, c, "tenant-b.cp-0", url)
	waitTask(t, c, "cp-1", "Completed")
	task := waitTask(t, c, "cp-0", "Exception")
	msg := task["Messages"].([]any)[0].(map[string]any)["Message"].(string)
	assert.Contains(t, msg, "x509: certificate signed by unknown authority", "tenant-b verifies as CDI does")

	ctx := context.Background()
	cms := s.Dyn.Resource(sim.ConfigMapResource).Namespace("tenant-a")
	name := kubevirt.CacheDataVolumeName(url) + "-ca"
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	want := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	assert.Equal(t, map[string]any{"ca.pem": want}, cm.Object["data"], "exactly the presented certificate")
	cache, err := s.Dyn.Resource(kubevirt.DataVolumeResource).Namespace("tenant-a").Get(ctx, kubevirt.CacheDataVolumeName(url), metav1.GetOptions{})
	require.NoError(t, err)
	certCM, _, _ := unstructured.NestedString(cache.Object, "spec", "source", "http", "certConfigMap")
	assert.Equal(t, name, certCM)

	// Nothing listens: no certificate to trust, so no import that could only fail.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "https://" + l.Addr().String() + "/gone.iso"
	require.NoError(t, l.Close())
	code, body := c.do(http.MethodPost, "/redfish/v1/Systems/tenant-a.cp-2/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia",
		map[string]any{"Image": closed})
	assert.Equal(t, http.StatusBadRequest, code)
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	assert.Contains(t, string(raw), "insecureTLS")
	assert.Contains(t, string(raw), "ActionParameterValueNotInList")

	// The pinned certificate goes with the unused cache.
	eject(t, c, "tenant-a.cp-1")
	eventually(t, "the presented certificate deleted with the unused cache", func() bool {
		_, err := cms.Get(ctx, name, metav1.GetOptions{})
		return err != nil
	})
}
