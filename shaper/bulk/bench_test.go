package bulk_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/shaperd/shaper/shaper/bulk"
)

// payload is a 128-byte JSON object, such as a producer sends.
func payload(i int) string {
	p := fmt.Sprintf(`{"order":"o-%05d","customer":"acme","items":[{"sku":"A-1","qty":2},{"sku":"B-7","qty":1}],"note":"`, i)
	return p + strings.Repeat("x", 128-len(p)-2) + `"}`
}

// benchBody builds 100 jobs, as an array or as NDJSON, each made by job.
func benchBody(array bool, job func(i int) string) []byte {
	var b bytes.Buffer
	for i := range 100 {
		switch {
		case array && i == 0:
			b.WriteByte('[')
		case array:
			b.WriteByte(',')
		case i > 0:
			b.WriteByte('\n')
		}
		b.WriteString(job(i))
	}
	if array {
		b.WriteByte(']')
	}
	return b.Bytes()
}

func BenchmarkParse(b *testing.B) {
	data := func(i int) string { return `{"data":` + payload(i) + `}` }
	headers := func(i int) string {
		return fmt.Sprintf(`{"data":%s,"headers":{"Shaper-Key":"acme","Nats-Msg-Id":"o-%05d"}}`, payload(i), i)
	}
	b64 := func(i int) string {
		return `{"data_base64":"` + base64.StdEncoding.EncodeToString([]byte(payload(i))) + `"}`
	}
	for _, bc := range []struct {
		name string
		body []byte
	}{
		{"array", benchBody(true, data)},
		{"ndjson", benchBody(false, data)},
		{"array_headers", benchBody(true, headers)},
		{"array_base64", benchBody(true, b64)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if jobs, err := bulk.Parse(bc.body, 100); err != nil || len(jobs) != 100 || jobs[99].Err != nil || len(jobs[99].Data) != 128 {
				b.Fatalf("%d jobs, %v", len(jobs), err)
			}
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bulk.Parse(bc.body, 100); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
