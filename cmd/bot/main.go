// Command bot is detour: a chat bot for Slack, Discord and the terminal that keeps
// answering when LLM providers fail.
//
// Usage:
//
//	bot [run] [--config PATH] [--env-file PATH] [--format text|jsonl] [--db PATH] [--log-level LEVEL]
//	bot init [--non-interactive --provider NAME --key-env PROVIDER=VAR --channel NAME --admin ID ...]
//	bot check [--config PATH] [--env-file PATH] [--probe]
//	bot history [--config PATH] [--env-file PATH] [--db PATH] [--session KEY] [--since 1h] [--format text|json]
//	bot status [--json] [--public] [--config PATH] [--env-file PATH] [--db PATH]
//	bot classify ...      classify provider error bodies (see bot classify -h)
//	bot fake-llm ...      serve the fault-injecting OpenAI-compatible server
//	bot drill ...         run failure drills against a fake provider
//	bot version
//
// Without --config, ./config.yaml is used when it exists; otherwise the bot starts
// the embedded demo (a console chat against a built-in fake provider).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// realMain runs one subcommand with signal handling and returns the exit code.
func realMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	defer stop()
	return dispatch(ctx, args, stdin, stdout, stderr)
}

// stopSignals end the bot gracefully: in-flight turns get drainGrace to finish.
// SIGHUP is `bot run`'s reload (see watchReload).
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1 // a runtime failure (database, network, adapter)
	exitUsage   = 2 // bad arguments or a bad configuration
	exitRestart = 3 // SIGHUP: the configuration on disk is good; start me again to apply it
)

// command is one subcommand: it gets the arguments after its name and returns
// the exit code.
type command func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int

// commands are the subcommands by name (bot without one runs). Set in init:
// parseFlags, which every command calls, looks a name up in it.
var commands map[string]command

func init() {
	commands = map[string]command{
		"run": runBot, "init": runInit, "check": runCheck, "history": runHistory, "status": runStatus,
		"classify": runClassify, "fake-llm": runFakeLLM, "drill": runDrill, "version": runVersion,
	}
}

// dispatch picks the subcommand: the first argument when it names one, else run.
func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return runBot(ctx, args, stdin, stdout, stderr)
	}
	if cmd, ok := commands[args[0]]; ok {
		return cmd(ctx, args[1:], stdin, stdout, stderr)
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	case "--version", "-version", "-v":
		return runVersion(ctx, nil, stdin, stdout, stderr)
	}
	if len(args[0]) == 0 || args[0][0] != '-' {
		fmt.Fprintf(stderr, "bot: unknown command %q\n", args[0])
		usage(stderr)
		return exitUsage
	}
	return runBot(ctx, args, stdin, stdout, stderr)
}

// runVersion is `bot version`: it takes no argument, and --help as every
// command does.
func runVersion(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	setUsage(fs, "Usage: bot version\n  prints the release, or the commit the binary was built from, and the Go toolchain (also: bot --version)\n")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	fmt.Fprintln(stdout, "detour", readBuildInfo())
	return exitOK
}

func usage(w io.Writer) {
	fmt.Fprint(w, `detour: a chat bot that keeps answering when LLM providers fail.

Usage:
  bot [run] [--config PATH] [--env-file PATH] [--format text|jsonl] [--db PATH]
            [--log-level debug|info|warn|error] [--log-format text|json] [--log-file PATH]
  bot init [--non-interactive] [--provider NAME]... [--model PROVIDER/MODEL]... [--key-env PROVIDER=VAR]...
           [--channel NAME]... [--admin slack:U…|discord:…]... [--access admins|everyone|IDS]
           [--admin-channel ID] [--daily-cap N] [--config PATH] [--env-file PATH] [--force] [--no-check]
                                write config.yaml, detour.env (the keys, 0600) and the Slack
                                manifest from a few questions (or flags), then run bot check
  bot check [--config PATH] [--env-file PATH] [--probe]
                                validate a configuration and print the resolved chains;
                                --probe also tries every model and key, Slack, Discord and the admin channel
  bot history [--session KEY] [--since 1h] [--all] [--limit N] [--format text|json]
              [--config PATH] [--env-file PATH] [--db PATH]
                                the fallback history (attempts and notices) from the database;
                                API keys and channel tokens need not be set
  bot status [--json] [--public] [--config PATH] [--env-file PATH] [--db PATH]
                                the provider health board from the database (as every replica
                                shows it); API keys and channel tokens need not be set
  bot classify ...              classify provider error bodies
  bot fake-llm ...              serve the fault-injecting OpenAI-compatible server
  bot drill [--config PATH] [--env-file PATH] ...
                                run failure drills against a fake provider (no key is read)
  bot version                   (also: bot --version)
  bot <command> --help          the flags of one command

Without --config, ./config.yaml is used when it exists; otherwise the embedded
demo starts (a console chat against a built-in fake provider, no account needed).
Without --env-file, ./detour.env is read when it exists (KEY=value lines for the
configuration's ${VAR} references; the environment wins).

Exit codes: 0 clean stop (end of input, SIGINT or SIGTERM after the in-flight
turns finished), 1 runtime failure (database, a channel that cannot connect, a
failing subcommand), 2 bad arguments or a bad configuration, 3 reload: after a
SIGHUP the configuration file was read again and is good, the in-flight turns
finished, and the bot exits so that its supervisor starts it on the new
configuration (packaging/detour.service does: RestartForceExitStatus=3); a
configuration with problems is refused, logged, and the bot keeps running.
`)
}

// parseFlags parses args into fs. --help prints the usage on stdout and ends the
// command with exit 0; a bad flag prints the error and the usage on stderr and
// ends it with exit 2, and so does an argument that is not a flag (no command
// takes one). ok is true when the command should go on.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (exit int, ok bool) {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case err == nil && fs.NArg() > 0:
		fmt.Fprintf(stderr, "bot %s: unexpected arguments: %v\n", fs.Name(), fs.Args())
		if _, isCmd := commands[fs.Arg(0)]; isCmd && fs.Name() == "run" {
			// bot --config c.yaml check: the flags went before the command.
			fixed := append(append([]string{fs.Arg(0)}, args[:len(args)-fs.NArg()]...), fs.Args()[1:]...)
			fmt.Fprintf(stderr, "bot: the command comes first, then its flags: bot %s\n", strings.Join(fixed, " "))
		}
		return exitUsage, false
	case err == nil:
		fs.SetOutput(stderr)
		return exitOK, true
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return exitOK, false
	}
	fs.SetOutput(stderr)
	fmt.Fprintf(stderr, "bot %s: %v\n", fs.Name(), err)
	fs.Usage()
	return exitUsage, false
}

// setUsage makes fs's usage text, followed by its flags.
func setUsage(fs *flag.FlagSet, text string) {
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), text)
		fs.PrintDefaults()
	}
}

// configFlag adds --config, as run, check and drill read it (resolveConfig).
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "", "configuration file (default ./config.yaml if it exists, else the embedded demo)")
}

// configFlags makes the flag set of a subcommand that loads a configuration
// as run and check do: with --config and --env-file.
func configFlags(name string) (fs *flag.FlagSet, path, envFile *string) {
	fs = flag.NewFlagSet(name, flag.ContinueOnError)
	path = configFlag(fs)
	envFile = fs.String("env-file", "", "KEY=value lines for the configuration's ${VAR} references (default ./detour.env if it exists; the environment wins)")
	return fs, path, envFile
}
