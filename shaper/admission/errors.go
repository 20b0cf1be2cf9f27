package admission

import "errors"

// ErrUnavailable is wrapped by an Admitter's error when its store could not
// decide (fail closed): the job is rejected as unavailable.
var ErrUnavailable = errors.New("admission: store unavailable")
