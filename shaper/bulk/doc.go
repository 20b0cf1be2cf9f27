// Package bulk reads the body of a bulk intake request into jobs. The body
// comes from anyone on the bus, so Parse never panics, stops reading at
// max_jobs, nests values at most 10000 deep, and says in its errors what was
// wrong and what would be valid. It checks the body's shape, the job count
// and each job's fields; the caller checks the body's size, the downstream
// and whether a single job would take each header.
//
// A body is a JSON array of job objects, or NDJSON: one job object per
// line. The first byte that is not whitespace tells them apart: '[' is an
// array, anything else NDJSON. A job object is {"data": <any JSON value>}
// or {"data_base64": "…"}, with optional "headers": {"Shaper-Key": "acme",
// …}.
//
// Parse answers in two ways. An error rejects the whole body: it names the
// line (NDJSON, 1-based) or the index (array, 0-based) and the byte offset
// where reading failed. A bad job is a Job whose Err names the field; the
// other jobs stand. The rules:
//
//   - Broken JSON anywhere is a whole-body error, as are an empty body, no
//     jobs, more than max_jobs jobs, and anything but whitespace after the
//     array's closing ']'.
//   - NDJSON: each line that is not blank holds exactly one JSON value,
//     with nothing after it but whitespace; a value cannot span lines.
//     Blank lines (whitespace only) are skipped. Lines may end in "\r\n".
//   - A job that is valid JSON but not an object (3, "x", [], null) is a
//     bad job.
//   - A job has exactly one of "data" and "data_base64"; neither or both
//     is a bad job. "data": null counts as present: the payload is the 4
//     bytes null.
//   - Data from "data" is the value's bytes exactly as written, without
//     the whitespace around it: {"a": 1} keeps its space, "\u00e9" its
//     escape. It is a sub-slice of the body, not a copy.
//   - "data_base64" is a string in standard base64 (RFC 4648 §4, padded);
//     URL-safe or unpadded base64 is a bad job. "" is an empty payload.
//   - "headers" is an object whose values are strings, with non-empty
//     names; anything else is a bad job naming the header. "headers": null
//     is the same as no headers.
//   - A field other than these three is a bad job naming it, and so is a
//     field or a header name given twice. Names match exactly: "Data" is
//     unknown. Escapes in names are resolved first ("d\u0061ta" is "data").
//   - Strings in headers are decoded as encoding/json decodes them.
//
// A job with more than one thing wrong names the first one found.
package bulk
