package daemon

import "errors"

// errBucketNotReady is the answer of a KV bucket's user (the runtime
// bucket's, the rates bucket's) while the bucket could not be found or
// created: it is tried again later.
var errBucketNotReady = errors.New("bucket not ready")

// errNotConnected is kvRuntime.Put's answer while the NATS connection is
// down.
var errNotConnected = errors.New("NATS not connected")

// errBothDelays refuses a job that names its instant twice.
var errBothDelays = errors.New("headers " + hdrDelay + " and " + hdrNotBefore + " are both given: send one")

// errMaxWait says what a valid Shaper-Max-Wait looks like.
var errMaxWait = errors.New("write a positive Go duration of at most 168h, e.g. 30s or 5m")
