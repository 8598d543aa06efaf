// Package redfish holds the Redfish wire model: resource structs, enums, @odata ids and the
// Base message registry used in error envelopes. It knows nothing about Kubernetes.
package redfish

import (
	"fmt"
	"net/http"
	"strings"
)

// BaseRegistry is the Base message registry version our MessageIds name.
const BaseRegistry = "Base.1.19.0"

// Message is one entry of @Message.ExtendedInfo.
type Message struct {
	ODataType         string   `json:"@odata.type"`
	MessageID         string   `json:"MessageId"`
	Message           string   `json:"Message"`
	MessageArgs       []string `json:"MessageArgs"`
	Severity          string   `json:"Severity"`
	MessageSeverity   string   `json:"MessageSeverity"`
	Resolution        string   `json:"Resolution"`
	RelatedProperties []string `json:"RelatedProperties,omitempty"`
}

// Error is a Redfish error: an HTTP status plus the messages of the error envelope.
type Error struct {
	Status   int
	Messages []Message
	// RetryAfter, when set, becomes a Retry-After header (seconds).
	RetryAfter int
}

func (e *Error) Error() string {
	parts := make([]string, 0, len(e.Messages))
	for _, m := range e.Messages {
		parts = append(parts, m.Message)
	}
	return fmt.Sprintf("%d: %s", e.Status, strings.Join(parts, "; "))
}

// Envelope is the JSON body of an error response.
type Envelope struct {
	Error EnvelopeError `json:"error"`
}

// EnvelopeError is the "error" object of an Envelope.
type EnvelopeError struct {
	Code         string    `json:"code"`
	Message      string    `json:"message"`
	ExtendedInfo []Message `json:"@Message.ExtendedInfo"`
}

// Envelope renders the error body. With one message its id is the code; with several the
// code is GeneralError, as DSP0266 asks.
func (e *Error) Envelope() Envelope {
	if len(e.Messages) == 1 {
		m := e.Messages[0]
		return Envelope{EnvelopeError{Code: m.MessageID, Message: m.Message, ExtendedInfo: e.Messages}}
	}
	g := generalError()
	return Envelope{EnvelopeError{Code: g.MessageID, Message: g.Message, ExtendedInfo: e.Messages}}
}

// Merge folds several 400-class errors into one response listing every message, so a client
// sees all problems of a body at once.
func Merge(errs []*Error) *Error {
	if len(errs) == 0 {
		return nil
	}
	out := &Error{Status: errs[0].Status}
	for _, e := range errs {
		out.Messages = append(out.Messages, e.Messages...)
	}
	return out
}

type msgDef struct {
	id, format, severity, resolution string
}

func (d msgDef) with(args []string, related ...string) Message {
	text := d.format
	for i, a := range args {
		text = strings.ReplaceAll(text, fmt.Sprintf("%%%d", i+1), a)
	}
	if args == nil {
		args = []string{}
	}
	return Message{
		ODataType:         "#Message.v1_1_2.Message",
		MessageID:         BaseRegistry + "." + d.id,
		Message:           text,
		MessageArgs:       args,
		Severity:          d.severity,
		MessageSeverity:   d.severity,
		Resolution:        d.resolution,
		RelatedProperties: related,
	}
}

func newErr(status int, d msgDef, args []string, related ...string) *Error {
	return &Error{Status: status, Messages: []Message{d.with(args, related...)}}
}

// Pointer turns a property path such as "Boot/BootSourceOverrideTarget" into the JSON pointer
// form RelatedProperties uses.
func Pointer(path string) string { return "#/" + path }

var (
	defGeneral = msgDef{"GeneralError", "A general error has occurred.  See Resolution for information on how to resolve the error, or @Message.ExtendedInfo if Resolution is not provided.", "Critical", "None."}
	defSuccess = msgDef{"Success", "The request completed successfully.", "OK", "None."}
)

func generalError() Message { return defGeneral.with(nil) }

// SuccessMessage is the Base Success message, for action responses that carry a body.
func SuccessMessage() Message { return defSuccess.with(nil) }

// PropertyUnknown: a PATCH named a property the resource does not have.
func PropertyUnknown(path string) *Error {
	return newErr(http.StatusBadRequest, msgDef{"PropertyUnknown", "The property %1 is not in the list of valid properties for the resource.", "Warning",
		"Remove the unknown property from the request body and resubmit the request if the operation failed."}, []string{lastSegment(path)}, Pointer(path))
}

// PropertyNotWritable: a PATCH tried to set a read-only property.
func PropertyNotWritable(path string) *Error {
	return newErr(http.StatusBadRequest, msgDef{"PropertyNotWritable", "The property %1 is a read only property and cannot be assigned a value.", "Warning",
		"Remove the property from the request body and resubmit the request if the operation failed."}, []string{lastSegment(path)}, Pointer(path))
}

// PropertyValueNotInList: an enum property got a value outside its allowable values.
func PropertyValueNotInList(value, path string) *Error {
	return newErr(http.StatusBadRequest, msgDef{"PropertyValueNotInList", "The value '%1' for the property %2 is not in the list of acceptable values.", "Warning",
		"Choose a value from the enumeration list that the implementation can support and resubmit the request if the operation failed."}, []string{value, lastSegment(path)}, Pointer(path))
}

// PropertyValueTypeError: a property got a JSON value of the wrong type.
func PropertyValueTypeError(value, path string) *Error {
	return newErr(http.StatusBadRequest, msgDef{"PropertyValueTypeError", "The value '%1' for the property %2 is of a different type than the property can accept.", "Warning",
		"Correct the value for the property in the request body and resubmit the request if the operation failed."}, []string{value, lastSegment(path)}, Pointer(path))
}

// PropertyValueConflict: two properties of one request contradict each other.
func PropertyValueConflict(path, otherPath string) *Error {
	return newErr(http.StatusBadRequest, msgDef{"PropertyValueConflict", "The property '%1' could not be written because its value would conflict with the value of the '%2' property.", "Warning",
		"No resolution is required."}, []string{lastSegment(path), lastSegment(otherPath)}, Pointer(path), Pointer(otherPath))
}

// MalformedJSON: the body is not JSON, or not the JSON object the resource expects.
func MalformedJSON() *Error {
	return newErr(http.StatusBadRequest, msgDef{"MalformedJSON", "The request body submitted was malformed JSON and could not be parsed by the receiving service.", "Critical",
		"Ensure that the request body is valid JSON and resubmit the request."}, nil)
}

// EmptyJSON: a PATCH with nothing in it.
func EmptyJSON() *Error {
	return newErr(http.StatusBadRequest, msgDef{"EmptyJSON", "The request body submitted contained an empty JSON object and the service is unable to process it.", "Warning",
		"Add properties in the JSON object and resubmit the request."}, nil)
}

// ResourceNotFound: unknown resource, or one the caller may not see (never 403, so it cannot
// be enumerated).
func ResourceNotFound(typ, id string) *Error {
	return newErr(http.StatusNotFound, msgDef{"ResourceNotFound", "The requested resource of type %1 named '%2' was not found.", "Critical",
		"Provide a valid resource identifier and resubmit the request."}, []string{typ, id})
}

// ActionParameterMissing: a required action parameter is absent.
func ActionParameterMissing(action, param string) *Error {
	return newErr(http.StatusBadRequest, msgDef{"ActionParameterMissing", "The action %1 requires the parameter %2 to be present in the request body.", "Critical",
		"Supply the action with the required parameter in the request body when the request is resubmitted."}, []string{action, param}, Pointer(param))
}

// ActionParameterValueNotInList: an action parameter value outside its allowable values.
func ActionParameterValueNotInList(value, param, action string) *Error {
	return newErr(http.StatusBadRequest, msgDef{"ActionParameterValueNotInList", "The value '%1' for the parameter %2 in the action %3 is not in the list of acceptable values.", "Warning",
		"Choose a value from the enumeration list that the implementation can support and resubmit the request if the operation failed."}, []string{value, param, action}, Pointer(param))
}

// ActionParameterValueTypeError: an action parameter of the wrong JSON type.
func ActionParameterValueTypeError(value, param, action string) *Error {
	return newErr(http.StatusBadRequest, msgDef{"ActionParameterValueTypeError", "The value '%1' for the parameter %2 in the action %3 is of a different type than the parameter can accept.", "Warning",
		"Correct the value for the parameter in the request body and resubmit the request if the operation failed."}, []string{value, param, action}, Pointer(param))
}

// ActionParameterValueFormatError: an action parameter of the right type but a bad format.
func ActionParameterValueFormatError(value, param, action string) *Error {
	return newErr(http.StatusBadRequest, msgDef{"ActionParameterValueFormatError", "The value '%1' for the parameter %2 in the action %3 is of a different format than the parameter can accept.", "Warning",
		"Correct the value for the parameter in the request body and resubmit the request if the operation failed."}, []string{value, param, action}, Pointer(param))
}

// ActionParameterUnknown: an action got a parameter it does not define.
func ActionParameterUnknown(action, param string) *Error {
	return newErr(http.StatusBadRequest, msgDef{"ActionParameterUnknown", "The action %1 was submitted with the invalid parameter %2.", "Warning",
		"Correct the invalid parameter and resubmit the request if the operation failed."}, []string{action, param}, Pointer(param))
}

// ActionNotSupported: the resource has no such action.
func ActionNotSupported(action string) *Error {
	return newErr(http.StatusBadRequest, msgDef{"ActionNotSupported", "The action %1 is not supported by the resource.", "Critical",
		"The action supplied cannot be resubmitted to the implementation.  Perhaps the action was invalid, the wrong resource was the target or the implementation documentation may be of assistance."}, []string{action})
}

// OperationNotAllowed: the method is not allowed on the resource (405).
func OperationNotAllowed() *Error {
	return newErr(http.StatusMethodNotAllowed, msgDef{"OperationNotAllowed", "The HTTP method is not allowed on this resource.", "Critical",
		"None."}, nil)
}

// NoValidSession: no or bad credentials (401).
func NoValidSession() *Error {
	return newErr(http.StatusUnauthorized, msgDef{"NoValidSession", "There is no valid session established with the implementation.", "Critical",
		"Establish a session before attempting any operations."}, nil)
}

// InsufficientPrivilege: authenticated, but the role does not allow the operation (403).
func InsufficientPrivilege() *Error {
	return newErr(http.StatusForbidden, msgDef{"InsufficientPrivilege", "There are insufficient privileges for the account or credentials associated with the current session to perform the requested operation.", "Critical",
		"Either abandon the operation or change the associated access rights and resubmit the request if the operation failed."}, nil)
}

// PreconditionFailed: If-Match did not match the current ETag (412).
func PreconditionFailed() *Error {
	return newErr(http.StatusPreconditionFailed, msgDef{"PreconditionFailed", "The ETag supplied did not match the ETag required to change this resource.", "Critical",
		"Try the operation again using the appropriate ETag."}, nil)
}

// ResourceInUse: the change conflicts with a concurrent change that kept winning (409).
func ResourceInUse(reason string) *Error {
	e := newErr(http.StatusConflict, msgDef{"ResourceInUse", "The change to the requested resource failed because the resource is in use or in transition.", "Warning",
		"Remove the condition and resubmit the request if the operation failed."}, nil)
	if reason != "" {
		e.Messages[0].Message += " " + reason
	}
	return e
}

// ServiceTemporarilyUnavailable: the cluster cannot be reached (503 with Retry-After).
func ServiceTemporarilyUnavailable(retryAfter int, reason string) *Error {
	e := newErr(http.StatusServiceUnavailable, msgDef{"ServiceTemporarilyUnavailable", "The service is temporarily unavailable.  Retry in %1 seconds.", "Critical",
		"Wait for the indicated retry duration and retry the operation."}, []string{fmt.Sprint(retryAfter)})
	if reason != "" {
		e.Messages[0].Message += " " + reason
	}
	e.RetryAfter = retryAfter
	return e
}

// InternalError: something failed that the client cannot fix (500).
func InternalError() *Error {
	return newErr(http.StatusInternalServerError, msgDef{"InternalError", "The request failed due to an internal service error.  The service is still operational.", "Critical",
		"Resubmit the request.  If the problem persists, consider resetting the service."}, nil)
}

func lastSegment(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[i+1:]
	}
	return path
}

// RequestRejected: the cluster refused a change the request asked for (400), with its reason.
func RequestRejected(reason string) *Error {
	e := newErr(http.StatusBadRequest, defGeneral, nil)
	e.Messages[0].Message = reason
	e.Messages[0].Resolution = "Correct the virtual machine or the request and resubmit it."
	return e
}

// TaskEventRegistry is the DMTF Task Event message registry version our task messages name.
const TaskEventRegistry = "TaskEvent.1.0.3"

// TaskMessage is the task's state as a TaskEvent message, with detail appended.
func TaskMessage(state, taskID, detail string) Message {
	d := msgDef{"TaskStarted", "The task with Id '%1' has started.", "OK", "None."}
	switch state {
	case "Completed":
		d = msgDef{"TaskCompletedOK", "The task with Id '%1' has completed.", "OK", "None."}
	case "Exception":
		d = msgDef{"TaskAborted", "The task with Id '%1' has been aborted.", "Critical", "None."}
	}
	m := d.with([]string{taskID})
	m.MessageID = TaskEventRegistry + "." + d.id
	if detail != "" {
		m.Message += " " + detail
	}
	return m
}

// ActionParameterValueConflict: two parameters of an action contradict each other.
func ActionParameterValueConflict(action, param, other string) *Error {
	return newErr(http.StatusBadRequest, msgDef{"ActionParameterValueConflict", "The parameters %1 and %2 in the action %3 are in conflict.", "Warning",
		"Correct one of the parameters and resubmit the request."}, []string{param, other, action}, Pointer(param), Pointer(other))
}
