package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// The operator socket answers a command with a stream of frames, so that
// the command's standard output, its standard error, a backup's bytes and
// the exit code travel in one response in the order they were written:
//
//	frame = kind (1 byte) | length (u32be) | payload (length bytes)
//
// Kinds: 'o' standard output, 'e' standard error, 'd' a backup's bytes,
// 'h' the backup's summary (JSON), 'x' the exit code (u32be, length 4,
// the last frame). A payload holds at most operatorFramePayloadMax bytes.
const (
	frameStdout = 'o'
	frameStderr = 'e'
	frameData   = 'd'
	frameInfo   = 'h'
	frameExit   = 'x'

	// operatorFramePayloadMax bounds one frame's payload; longer writes are
	// split.
	operatorFramePayloadMax = 64 << 10
	// operatorFrameHeaderSize is the kind and the length.
	operatorFrameHeaderSize = 5
)

// errOperatorStream: the operator socket's answer is not a valid stream of
// frames (an unknown kind, an oversized or cut frame, no exit frame).
var errOperatorStream = errors.New("operator socket: malformed answer")

// frameWriter writes frames to one response; its kinds' writers may be used
// from several goroutines.
type frameWriter struct {
	mu    sync.Mutex
	w     io.Writer
	flush func()
	err   error
}

// kind returns an io.Writer whose writes become frames of that kind.
func (f *frameWriter) kind(k byte) io.Writer { return frameKindWriter{f: f, kind: k} }

type frameKindWriter struct {
	f    *frameWriter
	kind byte
}

func (k frameKindWriter) Write(p []byte) (int, error) {
	if err := k.f.write(k.kind, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// write sends p as frames of kind k, each at most operatorFramePayloadMax.
func (f *frameWriter) write(k byte, p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	for first := true; first || len(p) > 0; first = false {
		n := min(len(p), operatorFramePayloadMax)
		var header [operatorFrameHeaderSize]byte
		header[0] = k
		binary.BigEndian.PutUint32(header[1:], uint32(n))
		if _, err := f.w.Write(header[:]); err != nil {
			f.err = err
			return err
		}
		if _, err := f.w.Write(p[:n]); err != nil {
			f.err = err
			return err
		}
		p = p[n:]
	}
	if f.flush != nil && k != frameData {
		f.flush()
	}
	return nil
}

// exit writes the exit frame.
func (f *frameWriter) exit(code int) error {
	var payload [4]byte
	binary.BigEndian.PutUint32(payload[:], uint32(code))
	return f.write(frameExit, payload[:])
}

// frameReader reads the frames of an answer.
type frameReader struct {
	r *bufio.Reader
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, operatorFramePayloadMax+operatorFrameHeaderSize)}
}

// next returns the next frame's kind and payload; the payload is valid
// until the next call. It returns io.EOF only at a frame boundary.
func (fr *frameReader) next(buf []byte) (kind byte, payload []byte, err error) {
	var header [operatorFrameHeaderSize]byte
	if _, err := io.ReadFull(fr.r, header[:1]); err != nil {
		return 0, nil, err
	}
	if _, err := io.ReadFull(fr.r, header[1:]); err != nil {
		return 0, nil, fmt.Errorf("%w: a frame header cut short", errOperatorStream)
	}
	kind = header[0]
	n := binary.BigEndian.Uint32(header[1:])
	switch kind {
	case frameStdout, frameStderr, frameData, frameInfo:
	case frameExit:
		if n != 4 {
			return 0, nil, fmt.Errorf("%w: an exit frame of %d bytes", errOperatorStream, n)
		}
	default:
		return 0, nil, fmt.Errorf("%w: frame kind %#x", errOperatorStream, kind)
	}
	if n > operatorFramePayloadMax {
		return 0, nil, fmt.Errorf("%w: a frame of %d bytes, above %d", errOperatorStream, n, operatorFramePayloadMax)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(fr.r, buf); err != nil {
		return 0, nil, fmt.Errorf("%w: a frame cut short", errOperatorStream)
	}
	return kind, buf, nil
}

// exitCodeOf decodes an exit frame's payload.
func exitCodeOf(payload []byte) (int, error) {
	code := binary.BigEndian.Uint32(payload)
	if code > 255 {
		return 0, fmt.Errorf("%w: exit code %d", errOperatorStream, code)
	}
	return int(code), nil
}
