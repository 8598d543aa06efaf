package main

import (
	"fmt"
	"log"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// routeLibraryLogs sends what client-go logs through klog (leader election, reflector and
// watch errors) and what net/http logs (TLS handshake errors) through the server's zap
// logger, so that every line the process writes is JSON with the same fields. It returns the
// http.Server error log.
func routeLibraryLogs(l *zap.Logger) *log.Logger {
	klog.SetLogger(logr.New(zapSink{log: l.Named("client-go").WithOptions(zap.WithCaller(false))}))
	httpLog, err := zap.NewStdLogAt(l.Named("http").WithOptions(zap.WithCaller(false)), zapcore.WarnLevel)
	if err != nil { // only for levels zap does not know
		panic(err)
	}
	return httpLog
}

// zapSink is a logr.LogSink over zap: klog's verbosity 0 is info, higher verbosities debug
// (klog only passes them on with -v, which the server does not set).
type zapSink struct{ log *zap.Logger }

func (s zapSink) Init(logr.RuntimeInfo) {}

func level(v int) zapcore.Level {
	if v > 0 {
		return zapcore.DebugLevel
	}
	return zapcore.InfoLevel
}

func (s zapSink) Enabled(v int) bool { return s.log.Core().Enabled(level(v)) }

func (s zapSink) Info(v int, msg string, kv ...any) {
	if ce := s.log.Check(level(v), msg); ce != nil {
		ce.Write(fields(kv)...)
	}
}

func (s zapSink) Error(err error, msg string, kv ...any) {
	if ce := s.log.Check(zapcore.ErrorLevel, msg); ce != nil {
		if err != nil {
			kv = append(kv, "error", err)
		}
		ce.Write(fields(kv)...)
	}
}

func (s zapSink) WithValues(kv ...any) logr.LogSink { return zapSink{log: s.log.With(fields(kv)...)} }

func (s zapSink) WithName(name string) logr.LogSink { return zapSink{log: s.log.Named(name)} }

// fields turns logr's alternating keys and values into zap fields.
func fields(kv []any) []zap.Field {
	out := make([]zap.Field, 0, (len(kv)+1)/2)
	for i := 0; i < len(kv); i += 2 {
		key, ok := kv[i].(string)
		if !ok {
			key = fmt.Sprint(kv[i])
		}
		if i+1 == len(kv) {
			out = append(out, zap.Any(key, "(missing value)"))
			break
		}
		if err, ok := kv[i+1].(error); ok {
			out = append(out, zap.NamedError(key, err))
			continue
		}
		out = append(out, zap.Any(key, kv[i+1]))
	}
	return out
}
