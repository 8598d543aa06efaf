package redfish

import "net/http"

// Messages of the HTTP protocol layer: query parameters and request headers.

// QueryNotSupported: a query parameter starting with $ that the service does not implement
// (501, DSP0266 "Query parameters"). The parameter is named in the message.
func QueryNotSupported(param string) *Error {
	e := newErr(http.StatusNotImplemented, msgDef{"QueryNotSupported", "Querying is not supported by the implementation.", "Warning",
		"Remove the query parameters and resubmit the request if the operation failed."}, nil)
	e.Messages[0].Message += " The query parameter " + param + " is not supported."
	return e
}

// QueryParameterValueFormatError: a supported query parameter with a malformed value (400).
func QueryParameterValueFormatError(value, param string) *Error {
	return newErr(http.StatusBadRequest, msgDef{"QueryParameterValueFormatError", "The value '%1' for the parameter %2 is of a different format than the parameter can accept.", "Warning",
		"Correct the value for the query parameter in the request and resubmit the request if the operation failed."}, []string{value, param})
}

// QueryParameterOutOfRange: a query parameter value outside what the service supports (400).
func QueryParameterOutOfRange(value, param, valid string) *Error {
	return newErr(http.StatusBadRequest, msgDef{"QueryParameterOutOfRange", "The value '%1' for the query parameter %2 is out of range %3.", "Warning",
		"Reduce the value for the query parameter to a value that is within range, such as a start or count value that is within bounds of the number of resources in a collection or a page that is within the range of valid pages."}, []string{value, param, valid})
}

// UnsupportedODataVersion: the request asked for an OData version the service does not
// speak (412, DSP0266 "OData-Version").
func UnsupportedODataVersion(version string) *Error {
	e := newErr(http.StatusPreconditionFailed, defGeneral, nil)
	e.Messages[0].Message = "The OData-Version '" + version + "' is not supported; this service supports OData-Version 4.0."
	e.Messages[0].Resolution = "Resubmit the request with OData-Version 4.0 or without the OData-Version header."
	return e
}

// MaxExpandLevels is the deepest $levels an $expand may ask for.
const MaxExpandLevels = 3

// SupportedProtocolFeatures is ServiceRoot.ProtocolFeaturesSupported: $expand with all three
// options and $levels; no $filter, $select, $top/$skip, only or excerpt.
var SupportedProtocolFeatures = ProtocolFeatures{
	ExpandQuery: ExpandFeatures{ExpandAll: true, Levels: true, Links: true, NoLinks: true, MaxLevels: MaxExpandLevels},
}
