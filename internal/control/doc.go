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
//	GET  /v1/status  -> Status
//	POST /v1/rate    SetRateRequest -> SetRateResponse
//	POST /v1/clear   ClearRequest -> {}
//	POST /v1/reload  {} -> {}; 422 with "problems" when the config is refused
package control
