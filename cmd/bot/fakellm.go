package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/detourbot/detour/internal/fakeprovider"
)

// runFakeLLM serves the fault-injecting fake provider (`bot fake-llm`): the
// OpenAI-compatible API, and Anthropic's, Azure's and Gemini's on their routes,
// until ctx ends. Flags: --listen ADDR (default 127.0.0.1:8089) and --script FILE
// (JSON lines of fakeprovider.Rule). It prints the base URL to stderr and returns the
// process exit code.
func runFakeLLM(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fake-llm", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8089", "address to listen on")
	script := fs.String("script", "", "file of JSON-lines rules to script at start")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	var rules []fakeprovider.Rule
	if *script != "" {
		f, err := os.Open(*script)
		if err != nil { // a script that is not there is a bad argument, as a bad flag is
			fmt.Fprintf(stderr, "fake-llm: %v\n", err)
			return exitUsage
		}
		rules, err = fakeprovider.ParseRules(f)
		_ = f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "fake-llm: %s: %v\n", *script, err)
			return exitUsage
		}
	}
	srv := fakeprovider.New(fakeprovider.WithRules(rules...))
	if err := srv.Start(*listen); err != nil {
		fmt.Fprintf(stderr, "fake-llm: %v\n", err)
		return exitFailed
	}
	defer srv.Close()
	fmt.Fprintf(stderr, "fake-llm: serving OpenAI-compatible API at %s (per provider: %s/<provider>/v1); %d rule(s) scripted\n",
		srv.BaseURL(""), srv.URL(), len(rules))
	fmt.Fprintf(stderr, "fake-llm: and per provider in its own protocol: api: anthropic at %s, api: azure at %s, api: gemini at %s\n",
		srv.BaseURLFor("<provider>", fakeprovider.APIAnthropic), srv.BaseURLFor("<provider>", fakeprovider.APIAzure), srv.BaseURLFor("<provider>", fakeprovider.APIGemini))
	fmt.Fprintf(stderr, "fake-llm: script with POST %s/_fake/script, reset with POST %s/_fake/reset, calls at GET %s/_fake/calls\n",
		srv.URL(), srv.URL(), srv.URL())
	_ = stdout
	<-ctx.Done()
	return 0
}
