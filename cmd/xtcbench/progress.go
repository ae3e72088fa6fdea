package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Progress is a one-line progress bar on a terminal: steps done out of the
// total, the current step, elapsed time and a naive ETA. On a non-terminal
// (or with --progress=off) it stays silent except for section headers when
// enabled explicitly. A nil *Progress is valid and does nothing.
type Progress struct {
	mu     sync.Mutex
	w      io.Writer
	total  int
	done   int
	start  time.Time
	tty    bool
	width  int
	last   string
	closed bool
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// NewProgress returns a bar for total steps, or nil when mode is "off" or
// ("auto" and w is not a terminal).
func NewProgress(mode string, w *os.File, total int) *Progress {
	tty := isTerminal(w)
	if mode == "off" || (mode == "auto" && !tty) {
		return nil
	}
	return &Progress{w: w, total: total, start: time.Now(), tty: tty, width: 30}
}

// Step marks one step finished; label names it.
func (p *Progress) Step(label string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.done++
	if p.done > p.total {
		p.total = p.done
	}
	p.render(label)
}

// Note shows what is running now without counting a step.
func (p *Progress) Note(label string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed && p.tty {
		p.render(label)
	}
}

func (p *Progress) render(label string) {
	el := time.Since(p.start)
	frac := float64(p.done) / float64(max(p.total, 1))
	fill := int(frac * float64(p.width))
	bar := strings.Repeat("█", fill) + strings.Repeat("░", p.width-fill)
	eta := ""
	if p.done > 0 && p.done < p.total {
		rem := time.Duration(float64(el) / float64(p.done) * float64(p.total-p.done))
		eta = " eta " + rem.Round(time.Second).String()
	}
	line := fmt.Sprintf("%s %3d/%d %5.1fs%s  %s", bar, p.done, p.total,
		el.Seconds(), eta, label)
	if p.tty {
		pad := ""
		if n := len([]rune(p.last)) - len([]rune(line)); n > 0 {
			pad = strings.Repeat(" ", n)
		}
		fmt.Fprintf(p.w, "\r%s%s", line, pad)
	} else {
		fmt.Fprintln(p.w, line)
	}
	p.last = line
}

// Done ends the bar's line.
func (p *Progress) Done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed && p.tty {
		fmt.Fprintln(p.w)
	}
	p.closed = true
}
