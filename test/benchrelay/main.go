// Command benchrelay is the intake bench's floor: a relay that does
// nothing but what any intake in front of NATS must, so the bench can
// tell what the machine allows a relay from what shaperd spends.
//
//	benchrelay -s URL -subject SUBJ [-store SUBJ]
//
// It answers requests on SUBJ (queue group "benchrelay"). With -store it
// is a durable intake stripped bare: each request's payload is published
// to the store subject (a stream's), pipelined, and the request is
// answered once its PubAck came, whatever the PubAck says (no parsing, no
// bound, no dedupe, no timeout). Without -store it answers at once. The
// answer has the shape of shaperd's accepted reply: a Shaper-Status
// header and a JSON body of the same size, so the producers and the
// server handle as many bytes as for shaperd.
//
// It is a bench tool, not an example: it loses requests whose PubAck never
// comes, and it stops only when killed.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
)

// body is an accepted reply's body as shaperd writes it, with a job id of
// the same length.
const body = `{"status":"accepted","downstream":"mem","job_id":"kVq7ZbC3nXWf1pR8yT2mLd","position":123456,"eta_seconds":123456}`

func main() {
	url := flag.String("s", nats.DefaultURL, "NATS server URL")
	subject := flag.String("subject", "", "the subject to answer requests on")
	store := flag.String("store", "", "publish each request's payload to this subject and answer on its PubAck")
	flag.Parse()
	if *subject == "" {
		fmt.Fprintln(os.Stderr, "benchrelay: -subject is required")
		os.Exit(2)
	}
	nc, err := nats.Connect(*url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrelay:", err)
		os.Exit(1)
	}
	answer := func(reply string) {
		if reply == "" {
			return
		}
		m := &nats.Msg{Subject: reply, Header: nats.Header{"Shaper-Status": []string{"accepted"}}, Data: []byte(body)}
		_ = nc.PublishMsg(m)
	}
	handle := func(m *nats.Msg) { answer(m.Reply) }
	if *store != "" {
		handle = relay(nc, *store, answer)
	}
	if _, err := nc.QueueSubscribe(*subject, "benchrelay", handle); err != nil {
		fmt.Fprintln(os.Stderr, "benchrelay:", err)
		os.Exit(1)
	}
	if err := nc.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "benchrelay:", err)
		os.Exit(1)
	}
	fmt.Println("benchrelay: ready")
	select {}
}

// relay returns the handler of a durable relay: the store is published
// with a reply subject of its own (one wildcard subscription, a token per
// store), and the PubAck's arrival answers the producer.
func relay(nc *nats.Conn, store string, answer func(string)) nats.MsgHandler {
	var (
		mu      sync.Mutex
		next    uint64
		pending = map[string]string{} // PubAck subject → the producer's reply
	)
	prefix := nc.NewInbox() + "."
	if _, err := nc.Subscribe(prefix+"*", func(ack *nats.Msg) {
		mu.Lock()
		reply := pending[ack.Subject]
		delete(pending, ack.Subject)
		mu.Unlock()
		answer(reply)
	}); err != nil {
		fmt.Fprintln(os.Stderr, "benchrelay:", err)
		os.Exit(1)
	}
	return func(m *nats.Msg) {
		mu.Lock()
		next++
		token := prefix + strconv.FormatUint(next, 10)
		pending[token] = m.Reply
		mu.Unlock()
		_ = nc.PublishMsg(&nats.Msg{Subject: store, Reply: token, Data: m.Data})
	}
}
