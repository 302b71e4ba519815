// Package control is shaperd's control API: HTTP+JSON over a unix socket.
//
// The daemon implements [Service] and serves it with [Listen], [NewServer]
// and [Server.Serve]; shaperctl talks to it with [Client], which implements
// [Service] too. The wire format is documented on each type; field names are
// stable. Rates travel as tc strings ("10mbit", see tbf.Rate's text form),
// durations as Go duration strings ("250ms"), times as RFC 3339.
//
// Endpoints (all bodies JSON; every error is {"error": "..."} with a 4xx or
// 5xx status, see [ErrorResponse]):
//
//	GET  /v1/status  -> Status                         (read)
//	POST /v1/rate    SetRateRequest -> SetRateResponse (admin)
//	POST /v1/clear   ClearRequest -> {}                (admin)
//	POST /v1/reload  {} or nothing -> {}; 422 with "problems" when the config is refused (admin)
//
// Roles: the server takes the caller's uid and gid from the kernel
// (SO_PEERCRED) and its supplementary groups from /proc/PID/status; see
// [Access]. A caller without the role gets 403 before its body is read.
//
// Request bodies are strict: one JSON object, field names exactly as
// documented (case matters), each at most once, no unknown fields, rates as
// tc strings, at most [MaxRequestBytes] (413 beyond, without reading the
// rest). Anything else is a 400 that changes nothing.
package control
