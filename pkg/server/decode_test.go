package server

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

const reg = redfish.BaseRegistry + "."

// msg is the part of a Redfish message the tests compare.
type msg struct {
	ID      string
	Args    []string
	Related []string
}

func msgsOf(e *redfish.Error) []msg {
	var out []msg
	for _, m := range e.Messages {
		out = append(out, msg{ID: m.MessageID, Args: m.MessageArgs, Related: m.RelatedProperties})
	}
	return out
}

func TestDecodeSystemPatchValid(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		target  *redfish.BootTarget
		enabled *redfish.BootEnabled
		mode    *redfish.BootMode
	}{
		{"target and enabled", `{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}}`,
			tp(redfish.BootCd), ep(redfish.BootOnce), nil},
		{"target only", `{"Boot":{"BootSourceOverrideTarget":"Pxe"}}`, tp(redfish.BootPxe), nil, nil},
		{"enabled only", `{"Boot":{"BootSourceOverrideEnabled":"Continuous"}}`, nil, ep(redfish.BootContinuous), nil},
		{"mode only", `{"Boot":{"BootSourceOverrideMode":"UEFI"}}`, nil, nil, mp(redfish.BootUEFI)},
		{"all three", `{"Boot":{"BootSourceOverrideTarget":"Hdd","BootSourceOverrideEnabled":"Continuous","BootSourceOverrideMode":"Legacy"}}`,
			tp(redfish.BootHdd), ep(redfish.BootContinuous), mp(redfish.BootLegacy)},
		{"None and Disabled", `{"Boot":{"BootSourceOverrideTarget":"None","BootSourceOverrideEnabled":"Disabled"}}`,
			tp(redfish.BootNone), ep(redfish.BootDisabled), nil},
		{"@odata annotations are ignored", `{"@odata.id":"/redfish/v1/Systems/x","@odata.etag":"\"abc\"","@odata.type":"#ComputerSystem","Boot":{"@odata.type":"x","BootSourceOverrideTarget":"Cd"}}`,
			tp(redfish.BootCd), nil, nil},
		{"whitespace around the object", " \n\t{\"Boot\":{\"BootSourceOverrideTarget\":\"Cd\"}} \r\n", tp(redfish.BootCd), nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := decodeSystemPatch([]byte(tc.body))
			require.Nil(t, err, "unexpected error %v", err)
			assert.Equal(t, tc.target, req.Target)
			assert.Equal(t, tc.enabled, req.Enabled)
			assert.Equal(t, tc.mode, req.Mode)
		})
	}
}

func tp(v redfish.BootTarget) *redfish.BootTarget   { return &v }
func ep(v redfish.BootEnabled) *redfish.BootEnabled { return &v }
func mp(v redfish.BootMode) *redfish.BootMode       { return &v }

func TestDecodeSystemPatchMalformed(t *testing.T) {
	bodies := map[string]string{
		"empty":                  "",
		"whitespace":             "   ",
		"not JSON":               "Boot=Cd",
		"truncated":              `{"Boot":{"BootSourceOverrideTarget":"Cd"}`,
		"array":                  `[{"Boot":{}}]`,
		"string":                 `"Cd"`,
		"number":                 `1`,
		"null":                   `null`,
		"true":                   `true`,
		"two objects":            `{"Boot":{"BootSourceOverrideTarget":"Cd"}}{"Boot":{}}`,
		"trailing word":          `{"Boot":{"BootSourceOverrideTarget":"Cd"}} garbage`,
		"trailing comma":         `{"Boot":{"BootSourceOverrideTarget":"Cd"}},`,
		"trailing number":        `{} 1`,
		"single quotes":          `{'Boot':{}}`,
		"trailing comma in body": `{"Boot":{"BootSourceOverrideTarget":"Cd",}}`,
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			_, err := decodeSystemPatch([]byte(body))
			require.NotNil(t, err)
			assert.Equal(t, http.StatusBadRequest, err.Status)
			assert.Equal(t, []msg{{ID: reg + "MalformedJSON", Args: []string{}}}, msgsOf(err))
		})
	}
}

// Regression test (the bug it found is fixed): decodeObject used json.Decoder.More to detect
// trailing data, which reports false when the next byte is '}' or ']', so a stray closing
// bracket after the object was accepted.
func TestDecodeObjectRejectsTrailingClosingBrackets(t *testing.T) {
	for _, body := range []string{
		`{"Boot":{"BootSourceOverrideTarget":"Cd"}}}`,
		`{"Boot":{"BootSourceOverrideTarget":"Cd"}}]`,
		`{"ResetType":"On"}}`,
	} {
		_, err := decodeObject([]byte(body))
		if assert.NotNil(t, err, "body %s must be MalformedJSON", body) {
			assert.Equal(t, reg+"MalformedJSON", err.Messages[0].MessageID)
		}
	}
}

func TestDecodeSystemPatchEmpty(t *testing.T) {
	for _, body := range []string{
		`{}`,
		`{"@odata.etag":"\"x\""}`,
		`{"Boot":{}}`,
		`{"Boot":{"@odata.type":"#ComputerSystem.v1_22_0.Boot"}}`,
	} {
		t.Run(body, func(t *testing.T) {
			_, err := decodeSystemPatch([]byte(body))
			require.NotNil(t, err)
			assert.Equal(t, http.StatusBadRequest, err.Status)
			assert.Equal(t, []msg{{ID: reg + "EmptyJSON", Args: []string{}}}, msgsOf(err))
		})
	}
}

func TestDecodeSystemPatchSingleErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		want msg
	}{
		{"unknown property", `{"Foo":1}`,
			msg{reg + "PropertyUnknown", []string{"Foo"}, []string{"#/Foo"}}},
		{"property names are case sensitive", `{"boot":{}}`,
			msg{reg + "PropertyUnknown", []string{"boot"}, []string{"#/boot"}}},
		{"unknown Boot property", `{"Boot":{"BootNext":"x"}}`,
			msg{reg + "PropertyUnknown", []string{"BootNext"}, []string{"#/Boot/BootNext"}}},
		{"read-only PowerState", `{"PowerState":"On"}`,
			msg{reg + "PropertyNotWritable", []string{"PowerState"}, []string{"#/PowerState"}}},
		{"read-only Id", `{"Id":"x"}`,
			msg{reg + "PropertyNotWritable", []string{"Id"}, []string{"#/Id"}}},
		{"read-only Name", `{"Name":"x"}`,
			msg{reg + "PropertyNotWritable", []string{"Name"}, []string{"#/Name"}}},
		{"read-only Status", `{"Status":{}}`,
			msg{reg + "PropertyNotWritable", []string{"Status"}, []string{"#/Status"}}},
		{"read-only Actions", `{"Actions":{}}`,
			msg{reg + "PropertyNotWritable", []string{"Actions"}, []string{"#/Actions"}}},
		{"annotations echoed from a GET change nothing", `{"Boot":{"BootSourceOverrideTarget@Redfish.AllowableValues":["Cd"]}}`,
			msg{reg + "EmptyJSON", []string{}, nil}},
		{"Boot is not an object", `{"Boot":"Cd"}`,
			msg{reg + "PropertyValueTypeError", []string{"Cd", "Boot"}, []string{"#/Boot"}}},
		{"Boot is null", `{"Boot":null}`,
			msg{reg + "PropertyValueTypeError", []string{"null", "Boot"}, []string{"#/Boot"}}},
		{"Boot is an array", `{"Boot":[]}`,
			msg{reg + "PropertyValueTypeError", []string{"[]", "Boot"}, []string{"#/Boot"}}},
		{"target is a number", `{"Boot":{"BootSourceOverrideTarget":1}}`,
			msg{reg + "PropertyValueTypeError", []string{"1", "BootSourceOverrideTarget"}, []string{"#/Boot/BootSourceOverrideTarget"}}},
		{"number echoed exactly as sent", `{"Boot":{"BootSourceOverrideTarget":1.50}}`,
			msg{reg + "PropertyValueTypeError", []string{"1.50", "BootSourceOverrideTarget"}, []string{"#/Boot/BootSourceOverrideTarget"}}},
		{"enabled is a bool", `{"Boot":{"BootSourceOverrideEnabled":true}}`,
			msg{reg + "PropertyValueTypeError", []string{"true", "BootSourceOverrideEnabled"}, []string{"#/Boot/BootSourceOverrideEnabled"}}},
		{"mode is null", `{"Boot":{"BootSourceOverrideMode":null}}`,
			msg{reg + "PropertyValueTypeError", []string{"null", "BootSourceOverrideMode"}, []string{"#/Boot/BootSourceOverrideMode"}}},
		{"mode is an object", `{"Boot":{"BootSourceOverrideMode":{"a":1}}}`,
			msg{reg + "PropertyValueTypeError", []string{`{"a":1}`, "BootSourceOverrideMode"}, []string{"#/Boot/BootSourceOverrideMode"}}},
		{"bad target", `{"Boot":{"BootSourceOverrideTarget":"Floppy"}}`,
			msg{reg + "PropertyValueNotInList", []string{"Floppy", "BootSourceOverrideTarget"}, []string{"#/Boot/BootSourceOverrideTarget"}}},
		{"enum values are case sensitive", `{"Boot":{"BootSourceOverrideTarget":"cd"}}`,
			msg{reg + "PropertyValueNotInList", []string{"cd", "BootSourceOverrideTarget"}, []string{"#/Boot/BootSourceOverrideTarget"}}},
		{"unsupported target UefiHttp", `{"Boot":{"BootSourceOverrideTarget":"UefiHttp"}}`,
			msg{reg + "PropertyValueNotInList", []string{"UefiHttp", "BootSourceOverrideTarget"}, []string{"#/Boot/BootSourceOverrideTarget"}}},
		{"bad enabled", `{"Boot":{"BootSourceOverrideEnabled":"Always"}}`,
			msg{reg + "PropertyValueNotInList", []string{"Always", "BootSourceOverrideEnabled"}, []string{"#/Boot/BootSourceOverrideEnabled"}}},
		{"bad mode", `{"Boot":{"BootSourceOverrideMode":"BIOS"}}`,
			msg{reg + "PropertyValueNotInList", []string{"BIOS", "BootSourceOverrideMode"}, []string{"#/Boot/BootSourceOverrideMode"}}},
		{"empty string", `{"Boot":{"BootSourceOverrideMode":""}}`,
			msg{reg + "PropertyValueNotInList", []string{"", "BootSourceOverrideMode"}, []string{"#/Boot/BootSourceOverrideMode"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeSystemPatch([]byte(tc.body))
			require.NotNil(t, err)
			assert.Equal(t, http.StatusBadRequest, err.Status)
			assert.Equal(t, []msg{tc.want}, msgsOf(err))
			env := err.Envelope()
			assert.Equal(t, tc.want.ID, env.Error.Code, "one message: its id is the code")
		})
	}
}

// Regression test (the bug it found is fixed): systemReadOnly was built by marshalling a zero
// ComputerSystem, which drops every omitempty field, so a PATCH of Description, SerialNumber
// or UUID (all shown by GET) answered PropertyUnknown instead of PropertyNotWritable.
func TestDecodeSystemPatchReadOnlyOmitemptyProperties(t *testing.T) {
	for _, prop := range []string{"Description", "SerialNumber", "UUID"} {
		_, err := decodeSystemPatch([]byte(`{"` + prop + `":"x"}`))
		require.NotNil(t, err)
		assert.Equal(t, []msg{{reg + "PropertyNotWritable", []string{prop}, []string{"#/" + prop}}}, msgsOf(err), prop)
	}
}

func TestDecodeSystemPatchSeveralErrors(t *testing.T) {
	body := `{"Foo":1,"PowerState":"On","Boot":{"BootSourceOverrideTarget":"Floppy","BootSourceOverrideEnabled":1,"Bar":true,"BootSourceOverrideMode":"UEFI"}}`
	_, err := decodeSystemPatch([]byte(body))
	require.NotNil(t, err)
	assert.Equal(t, http.StatusBadRequest, err.Status)
	assert.ElementsMatch(t, []msg{
		{reg + "PropertyUnknown", []string{"Foo"}, []string{"#/Foo"}},
		{reg + "PropertyNotWritable", []string{"PowerState"}, []string{"#/PowerState"}},
		{reg + "PropertyValueNotInList", []string{"Floppy", "BootSourceOverrideTarget"}, []string{"#/Boot/BootSourceOverrideTarget"}},
		{reg + "PropertyValueTypeError", []string{"1", "BootSourceOverrideEnabled"}, []string{"#/Boot/BootSourceOverrideEnabled"}},
		{reg + "PropertyUnknown", []string{"Bar"}, []string{"#/Boot/Bar"}},
	}, msgsOf(err))
	env := err.Envelope()
	assert.Equal(t, reg+"GeneralError", env.Error.Code)
	assert.NotEmpty(t, env.Error.Message)
	assert.Len(t, env.Error.ExtendedInfo, 5)

	// A valid change next to an invalid one is not applied either: the error wins.
	_, err = decodeSystemPatch([]byte(`{"Boot":{"BootSourceOverrideTarget":"Cd"},"Foo":1}`))
	require.NotNil(t, err)
	assert.Equal(t, []msg{{reg + "PropertyUnknown", []string{"Foo"}, []string{"#/Foo"}}}, msgsOf(err))
}

func TestDecodeReset(t *testing.T) {
	for _, rt := range redfish.ResetTypes {
		got, err := decodeReset([]byte(`{"ResetType":"` + string(rt) + `"}`))
		require.Nil(t, err, "%s: %v", rt, err)
		assert.Equal(t, rt, got)
	}

	const action = "ComputerSystem.Reset"
	missing := msg{reg + "ActionParameterMissing", []string{action, "ResetType"}, []string{"#/ResetType"}}
	malformed := msg{reg + "MalformedJSON", []string{}, nil}
	tests := []struct {
		name string
		body string
		want []msg
	}{
		{"no body", "", []msg{missing}},
		{"whitespace body", " \n ", []msg{missing}},
		{"empty object", "{}", []msg{missing}},
		{"Nmi is not offered", `{"ResetType":"Nmi"}`,
			[]msg{{reg + "ActionParameterValueNotInList", []string{"Nmi", "ResetType", action}, []string{"#/ResetType"}}}},
		{"PowerCycle is not offered", `{"ResetType":"PowerCycle"}`,
			[]msg{{reg + "ActionParameterValueNotInList", []string{"PowerCycle", "ResetType", action}, []string{"#/ResetType"}}}},
		{"case sensitive", `{"ResetType":"on"}`,
			[]msg{{reg + "ActionParameterValueNotInList", []string{"on", "ResetType", action}, []string{"#/ResetType"}}}},
		{"number", `{"ResetType":1}`,
			[]msg{{reg + "ActionParameterValueTypeError", []string{"1", "ResetType", action}, []string{"#/ResetType"}}}},
		{"null", `{"ResetType":null}`,
			[]msg{{reg + "ActionParameterValueTypeError", []string{"null", "ResetType", action}, []string{"#/ResetType"}}}},
		{"array", `{"ResetType":["On"]}`,
			[]msg{{reg + "ActionParameterValueTypeError", []string{`["On"]`, "ResetType", action}, []string{"#/ResetType"}}}},
		{"unknown parameter next to a valid one", `{"ResetType":"On","Force":true}`,
			[]msg{{reg + "ActionParameterUnknown", []string{action, "Force"}, []string{"#/Force"}}}},
		{"unknown parameter only", `{"Force":true}`,
			[]msg{{reg + "ActionParameterUnknown", []string{action, "Force"}, []string{"#/Force"}}, missing}},
		{"not an object", `"On"`, []msg{malformed}},
		{"array body", `[{"ResetType":"On"}]`, []msg{malformed}},
		{"not JSON", `ResetType=On`, []msg{malformed}},
		{"trailing data", `{"ResetType":"On"} x`, []msg{malformed}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeReset([]byte(tc.body))
			require.NotNil(t, err)
			assert.Empty(t, got)
			assert.Equal(t, http.StatusBadRequest, err.Status)
			assert.ElementsMatch(t, tc.want, msgsOf(err))
			if len(tc.want) > 1 {
				assert.Equal(t, reg+"GeneralError", err.Envelope().Error.Code)
			} else {
				assert.Equal(t, tc.want[0].ID, err.Envelope().Error.Code)
			}
		})
	}
}

func TestJSONKeys(t *testing.T) {
	keys := jsonKeys(redfish.Boot{})
	for _, k := range []string{"BootSourceOverrideTarget", "BootSourceOverrideTarget@Redfish.AllowableValues",
		"BootSourceOverrideEnabled", "BootSourceOverrideMode"} {
		assert.True(t, keys[k], k)
	}
	assert.True(t, systemReadOnly["PowerState"])
	assert.True(t, systemReadOnly["@odata.id"])
	assert.True(t, systemReadOnly["Boot"], "Boot is in the list but handled before it")
	assert.True(t, isAnnotation("@odata.etag"))
	assert.True(t, isAnnotation("BootSourceOverrideTarget@Redfish.AllowableValues"))
	assert.False(t, isAnnotation("odata.id"))
}
