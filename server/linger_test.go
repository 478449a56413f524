package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/server"
)

// rawRequest writes head and then body on a new connection to addr, all
// of it before reading, as most clients do, and reads the answer.
func rawRequest(addr, head string, body []byte) (*http.Response, []byte, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write([]byte(head)); err != nil {
		return nil, nil, err
	}
	// The body in 16 parts over about 640 ms, as a client on a slower
	// link sends it: longer than the server waits after its answer
	// before it closes a connection whose body it left unread.
	part := (len(body) + 15) / 16
	for len(body) > 0 {
		n := min(part, len(body))
		if _, err := conn.Write(body[:n]); err != nil {
			return nil, nil, err
		}
		body = body[n:]
		time.Sleep(40 * time.Millisecond)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return resp, b.Bytes(), err
}

// A body over the limit is answered with a readable 413 problem, though
// the client writes the whole 2 MiB before it reads: the server reads and
// discards it (up to server.LingerSizeMax) before it closes, so the
// connection is not reset under the client's read. 40 tries, 40 readable
// answers, with Content-Length and chunked.
func TestOversizedBodyGetsReadable413(t *testing.T) {
	ts := startServer(t, openBolt(t), server.Options{})
	token := ts.key("acme", allScopes...)
	addr := strings.TrimPrefix(ts.url, "http://")
	body := bytes.Repeat([]byte("x"), 2<<20)
	chunked := append([]byte(strconv.FormatInt(int64(len(body)), 16)+"\r\n"), body...)
	chunked = append(chunked, "\r\n0\r\n\r\n"...)
	errs := make(chan error, 40)
	var wg sync.WaitGroup
	for i := range 40 {
		if i >= 8 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		wg.Go(func() { errs <- try413(addr, token, i, body, chunked) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// try413 sends one 2 MiB body, by Content-Length on even tries and
// chunked on odd ones, and checks its answer is a readable 413 problem.
func try413(addr, token string, i int, body, chunked []byte) error {
	head := "POST /v1/chains/orders/entries HTTP/1.1\r\nHost: ledger\r\nAuthorization: Bearer " + token +
		"\r\nIdempotency-Key: big-" + strconv.Itoa(i) + "\r\nContent-Type: application/json\r\n"
	b := body
	if i%2 == 0 {
		head += "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	} else {
		head += "Transfer-Encoding: chunked\r\n\r\n"
		b = chunked
	}
	resp, got, err := rawRequest(addr, head, b)
	if err != nil {
		return fmt.Errorf("try %d: %v", i, err)
	}
	var p api.Problem
	if resp.StatusCode != http.StatusRequestEntityTooLarge || resp.Header.Get("Content-Type") != api.MediaProblem ||
		json.Unmarshal(got, &p) != nil || p.Code != api.CodePayloadTooLarge {
		return fmt.Errorf("try %d: %d %q %s", i, resp.StatusCode, resp.Header.Get("Content-Type"), got)
	}
	return nil
}

// Python's urllib, the library of the client guide's example, reads the
// 413 of a 2 MiB body every time (skipped without python3).
func TestOversizedBodyPythonUrllib(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	ts := startServer(t, openBolt(t), server.Options{})
	token := ts.key("acme", allScopes...)
	const script = `
import sys, urllib.request, urllib.error, json
url, token = sys.argv[1], sys.argv[2]
ok = 0
for i in range(40):
    req = urllib.request.Request(url + "/v1/chains/orders/entries", data=b"x" * (2 << 20), method="POST",
        headers={"Authorization": "Bearer " + token, "Idempotency-Key": "py-%d" % i, "Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req, timeout=30)
        print("try %d: no error" % i)
    except urllib.error.HTTPError as e:
        body = json.loads(e.read())
        if e.code == 413 and e.headers["Content-Type"] == "application/problem+json" and body["code"] == "PAYLOAD_TOO_LARGE":
            ok += 1
        else:
            print("try %d: %d %s" % (i, e.code, body))
    except Exception as e:
        print("try %d: %r" % (i, e))
print("readable 413s:", ok)
`
	out, err := exec.Command(python, "-c", script, ts.url, token).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "readable 413s: 40\n") {
		t.Fatalf("python3: %v\n%s", err, out)
	}
}
