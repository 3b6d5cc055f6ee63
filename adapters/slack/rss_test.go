package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/internal/testkit/fakeslack"
	"github.com/detourbot/detour/internal/testkit/peakrss"
)

// rssChildEnv switches the test binary into a child of TestI2_DownloadPeakRSS:
// its value is the file's URL, rssAPIEnv the fake's API URL.
const (
	rssChildEnv = "DETOUR_SLACK_RSS_CHILD"
	rssAPIEnv   = "DETOUR_SLACK_RSS_API"
)

type rssReport struct {
	Err      string
	TooLarge bool
	Bytes    int
	VmHWMKiB int64
}

// rssChild reads one file through the adapter, at most 5 MiB, and prints an
// rssReport.
func rssChild() int {
	a, err := New(Config{AppToken: canaryApp, BotToken: canaryBot, APIURL: os.Getenv(rssAPIEnv)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := a.ReadFile(ctx, adapters.File{Name: "clip.png", MIME: "image/png", Ref: os.Getenv(rssChildEnv)}, 5<<20)
	rep := rssReport{Bytes: len(b), TooLarge: errors.Is(err, adapters.ErrFileTooLarge)}
	if err != nil {
		rep.Err = err.Error()
	}
	return peakrss.Report(&rep, &rep.VmHWMKiB)
}

// TestI2_DownloadPeakRSS downloads files through the adapter in a child
// process, with a cap of 5 MiB: a tiny one (the baseline), 30 MB files whose
// size is announced or not (chunked), and one of 4 MiB that fits. Whatever the
// file, the child's peak RSS stays within 3 caps (15 MiB) of the baseline: the
// download stops at the cap and is never held whole. covers I2, I3
func TestI2_DownloadPeakRSS(t *testing.T) {
	peakrss.Require(t)
	const capBytes = 5 << 20
	srv := fakeslack.New()
	srv.BotToken = canaryBot
	srv.Start()
	defer srv.Close()
	run := func(t *testing.T, file map[string]any) rssReport {
		t.Helper()
		out := peakrss.Child(t, rssChildEnv+"="+file["url_private_download"].(string), rssAPIEnv+"="+srv.URL())
		var rep rssReport
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("child said %q: %v", out, err)
		}
		return rep
	}
	base := run(t, srv.AddFile("tiny.png", "image/png", []byte("\x89PNG\r\n\x1a\n")))
	t.Logf("baseline peak RSS %.1f MiB", float64(base.VmHWMKiB)/1024)
	cases := []struct {
		name      string
		file      map[string]any
		tooLarge  bool
		wantBytes int
	}{
		{"announced 30 MB", srv.AddLargeFile("a.png", "image/png", 30<<20, 30<<20), true, 0},
		{"unannounced 30 MB", srv.AddLargeFile("b.png", "image/png", 30<<20, 0), true, 0},
		{"unannounced 300 MB", srv.AddLargeFile("c.png", "image/png", 300<<20, 0), true, 0},
		{"4 MiB", srv.AddLargeFile("d.png", "image/png", 4<<20, 4<<20), false, 4 << 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := run(t, tc.file)
			grew := rep.VmHWMKiB - base.VmHWMKiB
			t.Logf("peak RSS %.1f MiB (+%.1f MiB); %d bytes; %s", float64(rep.VmHWMKiB)/1024, float64(grew)/1024, rep.Bytes, rep.Err)
			if grew*1024 > 3*capBytes {
				t.Errorf("peak RSS grew %d KiB over the baseline, want at most 3 caps (%d KiB)", grew, 3*capBytes/1024)
			}
			if rep.TooLarge != tc.tooLarge || rep.Bytes != tc.wantBytes {
				t.Errorf("read %d bytes, too large %v (%s); want %d, %v", rep.Bytes, rep.TooLarge, rep.Err, tc.wantBytes, tc.tooLarge)
			}
			if strings.Contains(rep.Err, "CANARY") {
				t.Errorf("a token in %q", rep.Err)
			}
		})
	}
}
