package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/url"
	"reflect"
	"strings"

	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/kubevirt"
	"github.com/kubevirt-redfish/kubevirt-redfish/pkg/redfish"
)

// decodeObject parses a request body that must be one JSON object. Numbers stay json.Number
// so a value can be echoed back in an error exactly as sent.
func decodeObject(body []byte) (map[string]any, *redfish.Error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, redfish.MalformedJSON()
	}
	// Nothing may follow the object: not another value, not a stray bracket.
	if _, err := dec.Token(); err != io.EOF {
		return nil, redfish.MalformedJSON()
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, redfish.MalformedJSON()
	}
	return obj, nil
}

// show renders a JSON value for an error message.
func show(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// isAnnotation reports keys a client may echo back from a GET (@odata.id, @odata.etag,
// Prop@Redfish.AllowableValues, ...) and that carry no change.
func isAnnotation(k string) bool { return strings.Contains(k, "@") }

// systemReadOnly are the ComputerSystem properties a GET shows that a PATCH may not set.
var systemReadOnly = jsonKeys(redfish.ComputerSystem{})

// bootReadOnly are the Boot properties shown but not writable.
var bootReadOnly = jsonKeys(redfish.Boot{})

// decodeSystemPatch validates a ComputerSystem PATCH. Every problem is reported at once and
// nothing is applied unless the whole body is valid.
func decodeSystemPatch(body []byte) (kubevirt.BootRequest, *redfish.Error) {
	var req kubevirt.BootRequest
	obj, rerr := decodeObject(body)
	if rerr != nil {
		return req, rerr
	}
	var errs []*redfish.Error
	changes := 0
	for k, v := range obj {
		switch {
		case isAnnotation(k):
		case k == "Boot":
			boot, ok := v.(map[string]any)
			if !ok {
				errs = append(errs, redfish.PropertyValueTypeError(show(v), "Boot"))
				continue
			}
			n, berrs := decodeBoot(boot, &req)
			changes += n
			errs = append(errs, berrs...)
		case systemReadOnly[k]:
			errs = append(errs, redfish.PropertyNotWritable(k))
		default:
			errs = append(errs, redfish.PropertyUnknown(k))
		}
	}
	if len(errs) > 0 {
		return req, redfish.Merge(errs)
	}
	if changes == 0 {
		return req, redfish.EmptyJSON()
	}
	return req, nil
}

func decodeBoot(boot map[string]any, req *kubevirt.BootRequest) (int, []*redfish.Error) {
	var errs []*redfish.Error
	n := 0
	for k, v := range boot {
		path := "Boot/" + k
		switch k {
		case "BootSourceOverrideTarget":
			t, err := enumValue(v, path, redfish.BootTargets)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			req.Target, n = &t, n+1
		case "BootSourceOverrideEnabled":
			e, err := enumValue(v, path, redfish.BootEnabledValues)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			req.Enabled, n = &e, n+1
		case "BootSourceOverrideMode":
			m, err := enumValue(v, path, redfish.BootModes)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			req.Mode, n = &m, n+1
		default:
			if isAnnotation(k) {
				continue
			}
			if bootReadOnly[k] {
				errs = append(errs, redfish.PropertyNotWritable(path))
			} else {
				errs = append(errs, redfish.PropertyUnknown(path))
			}
		}
	}
	return n, errs
}

// enumValue checks that v is a string from allowed.
func enumValue[T ~string](v any, path string, allowed []T) (T, *redfish.Error) {
	s, ok := v.(string)
	if !ok {
		return "", redfish.PropertyValueTypeError(show(v), path)
	}
	if !redfish.Contains(allowed, T(s)) {
		return "", redfish.PropertyValueNotInList(s, path)
	}
	return T(s), nil
}

const resetAction = "ComputerSystem.Reset"

// decodeReset validates a ComputerSystem.Reset body.
func decodeReset(body []byte) (redfish.ResetType, *redfish.Error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return "", redfish.ActionParameterMissing(resetAction, "ResetType")
	}
	obj, rerr := decodeObject(body)
	if rerr != nil {
		return "", rerr
	}
	var errs []*redfish.Error
	var rt redfish.ResetType
	for k, v := range obj {
		if isAnnotation(k) {
			continue
		}
		if k != "ResetType" {
			errs = append(errs, redfish.ActionParameterUnknown(resetAction, k))
			continue
		}
		s, ok := v.(string)
		switch {
		case !ok:
			errs = append(errs, redfish.ActionParameterValueTypeError(show(v), "ResetType", resetAction))
		case !redfish.Contains(redfish.ResetTypes, redfish.ResetType(s)):
			errs = append(errs, redfish.ActionParameterValueNotInList(s, "ResetType", resetAction))
		default:
			rt = redfish.ResetType(s)
		}
	}
	if _, ok := obj["ResetType"]; !ok {
		errs = append(errs, redfish.ActionParameterMissing(resetAction, "ResetType"))
	}
	if len(errs) > 0 {
		return "", redfish.Merge(errs)
	}
	return rt, nil
}

// jsonKeys lists the JSON property names of a struct's fields, omitempty ones included.
func jsonKeys(v any) map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeOf(v)
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}

const (
	insertAction = "VirtualMedia.InsertMedia"
	ejectAction  = "VirtualMedia.EjectMedia"
)

// decodeInsertMedia validates an InsertMedia body. Image is required; the other parameters
// Ironic may send are checked and accepted; Inserted and WriteProtected may only be true, as
// the ActionInfo says, since the CD is always read-only and inserted by this action.
func decodeInsertMedia(body []byte) (kubevirt.MediaRequest, *redfish.Error) {
	var req kubevirt.MediaRequest
	if len(bytes.TrimSpace(body)) == 0 {
		return req, redfish.ActionParameterMissing(insertAction, "Image")
	}
	obj, rerr := decodeObject(body)
	if rerr != nil {
		return req, rerr
	}
	var errs []*redfish.Error
	str := func(k string, v any) (string, bool) {
		s, ok := v.(string)
		if !ok {
			shown := show(v)
			if k == "UserName" || k == "Password" {
				shown = redfish.Redacted // image credentials never appear in errors
			}
			errs = append(errs, redfish.ActionParameterValueTypeError(shown, k, insertAction))
		}
		return s, ok
	}
	for k, v := range obj {
		switch k {
		case "Image":
			if s, ok := str(k, v); ok {
				if err := checkImageURL(s); err != nil {
					errs = append(errs, err)
				}
				req.Image = s
			}
		case "UserName":
			req.UserName, _ = str(k, v)
		case "Password":
			req.Password, _ = str(k, v)
		case "TransferProtocolType":
			if s, ok := str(k, v); ok && s != "HTTP" && s != "HTTPS" {
				errs = append(errs, redfish.ActionParameterValueNotInList(s, k, insertAction))
			}
		case "TransferMethod":
			if s, ok := str(k, v); ok && s != "Stream" && s != "Upload" {
				errs = append(errs, redfish.ActionParameterValueNotInList(s, k, insertAction))
			}
		case "Inserted", "WriteProtected":
			// A virtual CD is inserted by InsertMedia and is read-only: false cannot be honoured.
			b, ok := v.(bool)
			switch {
			case !ok:
				errs = append(errs, redfish.ActionParameterValueTypeError(show(v), k, insertAction))
			case !b:
				errs = append(errs, redfish.ActionParameterValueNotInList("false", k, insertAction))
			}
		default:
			errs = append(errs, redfish.ActionParameterUnknown(insertAction, k))
		}
	}
	if _, ok := obj["Image"]; !ok {
		errs = append(errs, redfish.ActionParameterMissing(insertAction, "Image"))
	}
	if (req.UserName == "") != (req.Password == "") && len(errs) == 0 {
		errs = append(errs, redfish.ActionParameterMissing(insertAction, map[bool]string{true: "Password", false: "UserName"}[req.Password == ""]))
	}
	if len(errs) > 0 {
		return kubevirt.MediaRequest{}, redfish.Merge(errs)
	}
	if p, ok := obj["TransferProtocolType"].(string); ok && !strings.EqualFold(p, schemeOf(req.Image)) {
		return kubevirt.MediaRequest{}, redfish.ActionParameterValueConflict(insertAction, "TransferProtocolType", "Image")
	}
	return req, nil
}

// checkImageURL accepts absolute http and https URLs without embedded credentials (those go
// in UserName and Password, which are kept out of logs and GETs).
func checkImageURL(s string) *redfish.Error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return redfish.ActionParameterValueFormatError(s, "Image", insertAction)
	}
	if u.User != nil {
		e := redfish.ActionParameterValueFormatError(u.Redacted(), "Image", insertAction)
		e.Messages[0].Message += " Pass credentials in UserName and Password, not in the URL."
		return e
	}
	return nil
}

func schemeOf(image string) string {
	if i := strings.Index(image, ":"); i > 0 {
		return image[:i]
	}
	return ""
}
