//go:build cgo

package xtc_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/xtc-go/xtc/internal/cfuzz"
)

// Native fuzz tests for every decoder of bytes that come from outside the
// process or from another process. `make test` runs each for a few seconds
// (go test -fuzz); the seeds below and testdata/fuzz/ are the committed
// corpus, replayed by every plain `go test`. The C decoders must never
// crash, hang or leak, and must answer consistently.

const (
	errInval = -1
	errRange = -4
	errIO    = -12
)

func frame(b []byte) []byte {
	var h [4]byte
	binary.LittleEndian.PutUint32(h[:], uint32(len(b)))
	return append(h[:], b...)
}

// FuzzDownExitDecode: DOWN and EXIT messages are ordinary mailbox bytes, so
// any peer can send something that looks like one.
func FuzzDownExitDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("DOWN"))
	f.Add(make([]byte, 16))
	f.Add(make([]byte, 32))
	f.Add(make([]byte, 64))
	f.Add(bytes.Repeat([]byte{0xff}, 48))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := cfuzz.Decode(b)
		if !d.Consistent {
			t.Fatalf("decoders disagree on %x: %+v", b, d)
		}
		for _, rc := range []int{d.DownRC, d.DownExRC, d.ExitRC} {
			if rc != 0 && rc != errInval {
				t.Fatalf("undocumented code %d for %x", rc, b)
			}
		}
	})
}

// FuzzOsprocServe: the child's side of the control socket reads whatever
// the parent (another process) writes. Every complete frame is answered
// with its echo, in order; a stream that ends mid-frame or announces an
// oversized frame is an error, never a crash or a hang.
func FuzzOsprocServe(f *testing.F) {
	f.Add([]byte{})
	f.Add(frame([]byte("hello")))
	f.Add(append(frame([]byte("a")), frame(nil)...))
	f.Add([]byte{1, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Add(append(frame([]byte("x")), 9, 0, 0, 0, 'y'))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<16 {
			return
		}
		rc, out := cfuzz.Serve(b)
		// what a correct reader answers: the echo of each whole frame
		var want []byte
		rest := b
		clean := true
		for len(rest) > 0 {
			if len(rest) < 4 {
				clean = false
				break
			}
			n := binary.LittleEndian.Uint32(rest)
			if uint64(n) > uint64(len(rest)-4) {
				clean = false
				break
			}
			want = append(want, frame(rest[4:4+n])...)
			rest = rest[4+n:]
		}
		if clean && rc != 0 {
			t.Fatalf("serve(%x) = %d on a well-formed stream", b, rc)
		}
		if !clean && rc == 0 {
			t.Fatalf("serve(%x) = 0 on a truncated stream", b)
		}
		if !clean && rc != errIO && rc != errRange && rc != errInval {
			t.Fatalf("serve(%x) = undocumented %d", b, rc)
		}
		if !bytes.Equal(out, want) {
			t.Fatalf("serve(%x) replied %x, want %x", b, out, want)
		}
	})
}

// FuzzOsprocCallReply: the parent reads the reply frame from the child, an
// untrusted process. A reply is accepted only when it is one whole frame
// within max_reply; otherwise the call fails (and hands out nothing).
func FuzzOsprocCallReply(f *testing.F) {
	f.Add([]byte{}, uint16(64))
	f.Add(frame([]byte("ok")), uint16(64))
	f.Add(frame(bytes.Repeat([]byte{'z'}, 100)), uint16(10))
	f.Add([]byte{5, 0, 0}, uint16(64))
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f}, uint16(64))
	f.Fuzz(func(t *testing.T, b []byte, maxReply uint16) {
		if len(b) > 1<<14 {
			return
		}
		rc, rep := cfuzz.Call(b, int(maxReply))
		if rc < -900 {
			t.Fatalf("harness failure %d", rc)
		}
		ok := false
		var want []byte
		if len(b) >= 4 {
			n := binary.LittleEndian.Uint32(b)
			if uint64(n) <= uint64(len(b)-4) && uint64(n) <= uint64(maxReply) {
				ok = true
				want = b[4 : 4+n]
			}
		}
		if ok && (rc != 0 || !bytes.Equal(rep, want)) {
			t.Fatalf("call with reply stream %x max %d = %d %x, want %x",
				b, maxReply, rc, rep, want)
		}
		if !ok && rc == 0 {
			t.Fatalf("call accepted a bad reply stream %x (max %d)", b, maxReply)
		}
	})
}

// FuzzMailboxFrame: bytes sent to a proc come back unchanged through
// xtc_recv and xtc_recv_correlate, and the runtime decoders treat them as
// they would any message.
func FuzzMailboxFrame(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("ping"))
	f.Add(make([]byte, 32))
	f.Add(bytes.Repeat([]byte{0xa5}, 600))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<16 {
			return
		}
		m := cfuzz.MailboxRoundTrip(b)
		if m.RunRC != 0 || m.RecvRC != 0 || !m.Same {
			t.Fatalf("round trip of %x: %+v", b, m)
		}
		if m.CorrRC != 0 || m.CorrN != 1 || !m.CorrSame {
			t.Fatalf("correlate on %x: %+v", b, m)
		}
		if !m.Dec.Consistent {
			t.Fatalf("decoders on a received %x disagree: %+v", b, m.Dec)
		}
	})
}
