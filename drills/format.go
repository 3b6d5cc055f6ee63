package drills

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Formats accepted by Write.
const (
	FormatText     = "text"
	FormatJSON     = "json"
	FormatMarkdown = "markdown"
)

// Write renders reports in format.
func Write(w io.Writer, format string, reports []Report) error {
	switch format {
	case "", FormatText:
		return WriteText(w, reports)
	case FormatJSON:
		return WriteJSON(w, reports)
	case FormatMarkdown:
		return WriteMarkdown(w, reports)
	}
	return fmt.Errorf("unknown format %q: want text, json or markdown", format)
}

// Passed reports whether every report's verdict passed.
func Passed(reports []Report) bool {
	for _, r := range reports {
		if !r.Verdict.Pass {
			return false
		}
	}
	return len(reports) > 0
}

func verdictWord(v Verdict) string {
	if v.Pass {
		return "PASS"
	}
	return "FAIL"
}

// WriteText prints one block per scenario: paid calls per model and profile,
// each step's answer time and outcome, notices, reports, cost and the checks.
func WriteText(w io.Writer, reports []Report) error {
	var b strings.Builder
	for i, r := range reports {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "== %s: %s  (%s)\n", r.Scenario, verdictWord(r.Verdict), r.Doc)
		fmt.Fprintf(&b, "   chain: %s", r.Primary)
		if len(r.Fallbacks) > 0 {
			fmt.Fprintf(&b, " -> %s", strings.Join(r.Fallbacks, " -> "))
		}
		fmt.Fprintf(&b, "; %d paid call(s) in %s\n", r.PaidCalls(), round(r.Elapsed))
		for _, g := range r.ByModelProfile() {
			prof := g.Profile
			if prof == "" {
				prof = "(no key)"
			}
			fmt.Fprintf(&b, "     %-40s %-24s %3d\n", g.Model, prof, g.Calls)
		}
		for _, t := range r.Turns {
			fmt.Fprintf(&b, "   step %d", t.Step)
			if t.Sessions > 1 {
				fmt.Fprintf(&b, " (%d sessions)", t.Sessions)
			}
			if t.Advanced > 0 {
				fmt.Fprintf(&b, " after +%s", t.Advanced)
			}
			fmt.Fprintf(&b, ": %d paid call(s), %s", t.Calls, round(t.Elapsed))
			if len(t.Answers) == 1 {
				a := t.Answers[0]
				switch a.Kind {
				case "reply":
					fmt.Fprintf(&b, ", answered by %s", a.Model)
				default:
					fmt.Fprintf(&b, ", %s: %s", a.Kind, clip(a.Text, 200))
				}
			} else {
				fmt.Fprintf(&b, ", %s", summarize(t.Answers))
			}
			b.WriteString("\n")
			for _, s := range t.Notices {
				fmt.Fprintf(&b, "     notice: %s\n", clip(s, 200))
			}
			for _, s := range t.Reports {
				fmt.Fprintf(&b, "     admin report: %s\n", clip(s, 300))
			}
		}
		if r.Priced {
			fmt.Fprintf(&b, "   estimated cost: $%.6f\n", r.CostUSD)
		}
		for _, c := range r.Verdict.Checks {
			mark := "ok  "
			if !c.Pass {
				mark = "FAIL"
			}
			fmt.Fprintf(&b, "   %s %s: %s\n", mark, c.Name, c.Detail)
		}
	}
	if len(reports) > 1 {
		pass := 0
		for _, r := range reports {
			if r.Verdict.Pass {
				pass++
			}
		}
		fmt.Fprintf(&b, "\n%d of %d drills passed\n", pass, len(reports))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func summarize(as []Answer) string {
	kinds := map[string]int{}
	for _, a := range as {
		kinds[a.Kind]++
	}
	var parts []string
	for _, k := range []string{"reply", "error", "none"} {
		if kinds[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", kinds[k], plural(k, kinds[k])))
		}
	}
	return strings.Join(parts, ", ")
}

// WriteJSON writes the reports as one indented JSON array.
func WriteJSON(w io.Writer, reports []Report) error {
	if reports == nil {
		reports = []Report{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(reports)
}

// WriteMarkdown writes one table row per drill: paid calls, time to the first
// answer or error, the outcome, the verdict and the OpenClaw figure for the same shape.
func WriteMarkdown(w io.Writer, reports []Report) error {
	var b strings.Builder
	b.WriteString("| drill | paid calls | time to answer / error (step 1) | outcome (step 1) | verdict | OpenClaw 2026.9.6, same shape |\n")
	b.WriteString("| --- | ---: | ---: | --- | --- | --- |\n")
	for _, r := range reports {
		d, what := r.FirstAnswer()
		calls := fmt.Sprint(r.PaidCalls())
		if len(r.Turns) > 1 {
			per := make([]string, len(r.Turns))
			for i, t := range r.Turns {
				per[i] = fmt.Sprint(t.Calls)
			}
			calls += " (" + strings.Join(per, "+") + ")"
		}
		v := verdictWord(r.Verdict)
		if !r.Verdict.Pass {
			var failed []string
			for _, c := range r.Verdict.Checks {
				if !c.Pass {
					failed = append(failed, c.Name)
				}
			}
			v += ": " + strings.Join(failed, "; ")
		}
		oc := "—"
		if sc, ok := Lookup(r.Scenario); ok && sc.OpenClaw != "" {
			oc = sc.OpenClaw
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.Scenario, calls, round(d), mdEscape(what), mdEscape(v), mdEscape(oc))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
