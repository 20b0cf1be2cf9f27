package service

import "errors"

var (
	// ErrStopped is returned by Start once the list or loop was stopped.
	ErrStopped = errors.New("service: the list was stopped; nothing more starts")
	// ErrStarted is returned by a second Start of a Loop.
	ErrStarted = errors.New("service: already started; a service starts once")
)
