// Package batch is the wire side of a bulk downstream (a downstream with
// batch settings): one call carries several jobs, each still its own.
//
// An Encoding turns the jobs of one call into its body (json_array,
// ndjson, multipart) and says at intake whether a payload can be carried
// at all (Check). Headers gives the call's headers: its batch id (also
// its Idempotency-Key), its size, and its jobs' ids and attempts in body
// order. ParseAnswer reads which jobs of a 2xx answer failed, in the
// shape of AWS Lambda's batchItemFailures: {"failed":[{"job_id",
// "error","retry"}]}, every job not named having succeeded.
//
// The package does no I/O and keeps no state: the lane decides which jobs
// go into a call, and the sinks send it.
package batch
