package service_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/shaperd/shaper/shaper/service"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a service that writes its starts and stops into a log.
func recorder(name string, log *[]string, startErr error) *service.Funcs {
	return &service.Funcs{
		StartFunc: func(context.Context) error { *log = append(*log, "start "+name); return startErr },
		StopFunc:  func() error { *log = append(*log, "stop "+name); return nil },
	}
}

func TestListStopsInReverse(t *testing.T) {
	var log []string
	var l service.List
	if err := l.Start(t.Context(), recorder("a", &log, nil), recorder("b", &log, nil)); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(t.Context(), recorder("c", &log, nil)); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(l.Stop(), l.Stop()); err != nil {
		t.Fatal(err)
	}
	want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}
	if !slices.Equal(log, want) {
		t.Fatalf("log = %q, want %q", log, want)
	}
	if err := l.Start(t.Context(), recorder("d", &log, nil)); !errors.Is(err, service.ErrStopped) {
		t.Fatalf("Start after Stop = %v, want ErrStopped", err)
	}
}

func TestListStopsOnlyWhatStarted(t *testing.T) {
	var log []string
	var l service.List
	boom := errors.New("boom")
	err := l.Start(t.Context(), recorder("a", &log, nil), recorder("b", &log, boom), recorder("c", &log, nil))
	if !errors.Is(err, boom) {
		t.Fatalf("Start = %v, want boom", err)
	}
	if err := l.Stop(); err != nil {
		t.Fatal(err)
	}
	want := []string{"start a", "start b", "stop a"}
	if !slices.Equal(log, want) {
		t.Fatalf("log = %q, want %q", log, want)
	}
}

func TestLoopRunsUntilStop(t *testing.T) {
	ran := make(chan struct{})
	lp := &service.Loop{Run: func(ctx context.Context) {
		close(ran)
		<-ctx.Done()
	}}
	ctx, cancel := context.WithCancel(t.Context())
	if err := lp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel() // Start's context is not the loop's lifetime
	<-ran
	if err := lp.Start(t.Context()); !errors.Is(err, service.ErrStarted) {
		t.Fatalf("second Start = %v, want ErrStarted", err)
	}
	if err := errors.Join(lp.Stop(), lp.Stop()); err != nil {
		t.Fatal(err)
	}
	if err := lp.Start(t.Context()); !errors.Is(err, service.ErrStopped) {
		t.Fatalf("Start after Stop = %v, want ErrStopped", err)
	}
}

func TestFuncsStopWithoutStart(t *testing.T) {
	stopped := false
	f := &service.Funcs{StopFunc: func() error { stopped = true; return nil }}
	if err := f.Stop(); err != nil || stopped {
		t.Fatalf("Stop before Start: err %v, stopped %v; want neither", err, stopped)
	}
}
