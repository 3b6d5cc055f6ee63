package sessions

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/commands"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/suggest"
	"github.com/detourbot/detour/redact"
)

// ErrUnknownModel is returned by SetModel for a model whose provider is not configured.
var ErrUnknownModel = errors.New("sessions: unknown model")

// ErrUnknownProfile is returned by SetModel for a profile that is not configured.
var ErrUnknownProfile = errors.New("sessions: unknown profile")

// runCommand answers one parsed command. Answers are KindReply (ephemeral where
// the platform allows); bad input and refusals are KindError, in their own
// words.
func (r *Router) runCommand(ctx context.Context, w *writer, c commands.Command) {
	in := w.in
	text, err := r.command(ctx, in, c)
	switch {
	case errors.As(err, new(*badArgument)):
		_ = w.finish(ctx, reply(in, adapters.KindError, err.Error())) // its own text, never a sentinel's
	case err != nil:
		r.log.Warn("command failed", "session", in.SessionKey, "command", c.Name, "err", err)
		_ = w.finish(ctx, reply(in, adapters.KindError, fmt.Sprintf("/%s failed: internal error", c.Name)))
	default:
		out := reply(in, adapters.KindReply, text)
		out.Ephemeral = true
		if c.Name == commands.CmdModel && c.Ref == "" && !c.List && !c.Default {
			// L4: /model alone offers the models as a pick where the channel
			// can show one; choosing says "/model <ref>".
			for _, m := range r.choosableModels() {
				out.Choices = append(out.Choices, adapters.Choice{Label: m, Command: "/model " + m})
			}
			out.Choices = append(out.Choices, adapters.Choice{Label: "default", Command: "/model default"})
		}
		_ = w.finish(ctx, out)
	}
}

// command is the text of the answer to c, or an error; a *badArgument's text
// is what the person reads (bad input, a refusal). A command that changes
// something answers with its text and the error of doing it.
func (r *Router) command(ctx context.Context, in adapters.Inbound, c commands.Command) (string, error) {
	if c.Err != "" {
		return "", denied(c.Err)
	}
	if (c.Name == commands.CmdModel || c.Name == commands.CmdNew) && (c.Ref != "" || c.Alias != "") {
		// What was typed becomes a model people may choose, or the answer says
		// why not (with the nearest name).
		typed := c.Ref
		if c.Alias != "" {
			typed = c.Alias
		}
		ref, err := r.chooseModel(typed)
		if err != nil {
			return "", err
		}
		c.Ref, c.Alias = string(ref), ""
	}
	if in.DefaultsFor != "" && ((c.Name == commands.CmdModel && (c.Ref != "" || c.Default)) || c.Name == commands.CmdNew || c.Name == commands.CmdReset) {
		changes := c.Name != commands.CmdNew || c.Ref != ""
		if changes && !r.cfg.Access.ChannelModelEveryone && !r.cfg.isAdmin(in) {
			return "", denied(channelModelRefusal(in.DefaultsFor)) // T9
		}
		return r.setDefaults(ctx, in, c)
	}
	switch c.Name {
	case commands.CmdHelp:
		return commands.HelpText(), nil
	case commands.CmdModels:
		return r.modelsText(ctx, in, true)
	case commands.CmdModel:
		return r.modelCommand(ctx, in, c)
	case commands.CmdNew:
		if err := r.NewSession(ctx, in.SessionKey, c.Ref); err != nil || c.Ref == "" {
			return "new conversation started", err
		}
		return "new conversation started on " + c.Ref, nil
	case commands.CmdReset:
		return fmt.Sprintf("conversation reset; model back to %s", r.baseFor(in)), r.Reset(ctx, in.SessionKey)
	case commands.CmdStatus:
		info, err := r.Status(ctx, in.SessionKey, in.Channel)
		return commands.StatusText(info), err
	case commands.CmdCompact:
		return r.CompactNow(ctx, in)
	case commands.CmdUsage:
		if c.All && !r.cfg.isAdmin(in) {
			return "", denied("/usage all is for admins (admin.users in the config); /usage shows your own")
		}
		info, err := r.Usage(ctx, in, c.All)
		return commands.UsageText(info), err
	case commands.CmdRecover:
		if !r.cfg.isAdmin(in) {
			return "", denied("/recover is for admins (admin.users in the config)")
		}
		if c.Ref == "" {
			return r.Recover(ctx, c.Profile)
		}
		return r.Recover(ctx, c.Ref)
	}
	return "", fmt.Errorf("sessions: no answer for command %q", c.Name)
}

// modelCommand runs /model: the picker (alone), list, default, or <ref>.
func (r *Router) modelCommand(ctx context.Context, in adapters.Inbound, c commands.Command) (string, error) {
	switch {
	case c.Default:
		return fmt.Sprintf("back to the configured model %s", r.baseFor(in)), r.ClearModel(ctx, in.SessionKey)
	case c.Ref != "":
		return r.setModelText(c, "model set to "+c.Ref), r.SetModel(ctx, in.SessionKey, c.Ref, c.Profile)
	}
	return r.modelsText(ctx, in, c.List)
}

// modelsText is what /models and /model list show of in's session (list),
// or the /model picker's text: the session's choice (L4).
func (r *Router) modelsText(ctx context.Context, in adapters.Inbound, list bool) (string, error) {
	e, err := r.st.load(ctx, in.SessionKey)
	if err != nil {
		return "", err
	}
	if list {
		return commands.ModelsText(r.modelList(e, in.Channel)), nil
	}
	return commands.ModelText(r.modelChoice(e, in.Channel)), nil
}

// setModelText is the answer to a model set with /model: what was set and
// that it is exact.
func (r *Router) setModelText(c commands.Command, set string) string {
	if c.Profile != "" {
		set += " with profile " + c.Profile
	}
	return set + " (exact: if it fails you will see the failure; /model default goes back)"
}

// channelModelRefusal is the answer to someone who is not an admin and tries
// to set the model of every new conversation of a channel (T9).
func channelModelRefusal(what string) string {
	return "only admins may choose the model for " + what + " (admin.users; access.channel_model: everyone lets anyone); " +
		"to choose for one conversation, use !model <model> inside its thread, or /model in a direct message"
}

// setDefaults runs /model <ref>, /model default, /new and /reset on a session that
// holds the model of new conversations (Inbound.DefaultsFor) and answers in those
// terms: the stored choice is copied into each new session under it when that is
// created (sessionStore.inherit).
func (r *Router) setDefaults(ctx context.Context, in adapters.Inbound, c commands.Command) (string, error) {
	const keep = "; threads already started keep their model"
	switch {
	case c.Ref != "": // /model x, /new x
		if err := r.SetModel(ctx, in.SessionKey, c.Ref, c.Profile); err != nil {
			return "", err
		}
		return r.setModelText(c, fmt.Sprintf("%s will use %s", in.DefaultsFor, c.Ref)) + keep, nil
	case c.Name == commands.CmdNew: // every new thread is already a new conversation
		e, err := r.st.load(ctx, in.SessionKey)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s will use %s%s", in.DefaultsFor, r.selectionFor(e, in.Channel).selected, keep), nil
	default: // /model default, /reset
		if err := r.Reset(ctx, in.SessionKey); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s will use the configured model %s%s", in.DefaultsFor, r.baseFor(in), keep), nil
	}
}

func (r *Router) baseFor(in adapters.Inbound) failover.ModelRef {
	if a := r.agentFor(in.SessionKey, in.Channel); a != nil && a.Model != "" {
		return a.Model
	}
	return r.cfg.Primary
}

// choosableModels lists the models people can choose: those of the configured
// chains, then the models marked selectable.
func (r *Router) choosableModels() []string {
	out := make([]string, len(r.choices.models))
	for i, m := range r.choices.models {
		out[i] = string(m)
	}
	return out
}

// configuredModels lists every model the config names: the chains, agent
// models and every models: entry, without duplicates.
func (r *Router) configuredModels() []string {
	refs := append([]failover.ModelRef{r.cfg.Primary}, r.cfg.Fallbacks...)
	for _, a := range r.cfg.Agents {
		refs = append(refs, a.Model)
	}
	var out []string
	for _, m := range dedupe(append(refs, slices.Sorted(maps.Keys(r.cfg.Models))...)) {
		if m != "" {
			out = append(out, string(m))
		}
	}
	return out
}

// providerKnown reports whether p is a configured provider.
func (r *Router) providerKnown(p string) bool {
	if len(r.cfg.Providers) > 0 {
		return slices.Contains(r.cfg.Providers, p)
	}
	if _, ok := r.cfg.Profiles[p]; ok {
		return true
	}
	return slices.ContainsFunc(r.configuredModels(), func(m string) bool { return strings.HasPrefix(m, p+"/") })
}

// recoverable reports whether /recover may probe ref: a model the
// configuration names (chains, agents, models:) or one people may choose
// (agents.defaults.model.allow).
func (r *Router) recoverable(ref string) bool {
	return slices.Contains(r.configuredModels(), ref) || r.choices.may(failover.ModelRef(ref))
}

// recoverHint is "; did you mean X?" for the nearest model or profile /recover
// takes, and where to look otherwise (B3).
func (r *Router) recoverHint(target string) string {
	var known []string
	if strings.Contains(target, "/") || !strings.Contains(target, ":") {
		known = append(known, r.configuredModels()...)
	}
	if !strings.Contains(target, "/") {
		for _, prof := range r.cfg.Profiles {
			for _, p := range prof {
				known = append(known, p.ID)
			}
		}
		sort.Strings(known)
	}
	if best, ok := suggest.Closest(target, known); ok {
		return "; did you mean " + best + "? (/recover takes a model of the configuration, provider/model, or a profile id, provider:name)"
	}
	return " (/recover takes a model of the configuration, provider/model, or a profile id, provider:name; /status lists them)"
}

// checkModel resolves ref (a model or an alias) to a model people may choose and
// checks that profile, if any, is one of its provider's.
func (r *Router) checkModel(ref, profile string) (failover.ModelRef, error) {
	m, err := r.chooseModel(ref)
	if err != nil {
		return "", err
	}
	if profile == "" {
		return m, nil
	}
	p, _ := m.Split()
	if slices.ContainsFunc(r.cfg.Profiles[p], func(pr failover.Profile) bool { return pr.ID == profile }) {
		return m, nil
	}
	return "", refused(ErrUnknownProfile, "unknown profile: %q is not a configured profile of %s", profile, p)
}

// userModelPatch is the patch of a user-chosen model (S4, O4).
func userModelPatch(ref, profile string) map[string]any {
	p, m := failover.ModelRef(ref).Split()
	f := map[string]any{
		"provider_override": p, "model_override": m, "model_override_source": string(failover.SourceUser),
		"fallback_origin": "", "fallback_reason": "", "fallback_status": 0, "last_probe_at": nil, "live_switch": true,
		"notice_selected": "", "notice_active": "", "notice_reason": "",
		"auth_profile_override": "", "auth_profile_override_source": "", "auth_profile_override_compaction_count": 0,
	}
	if profile != "" {
		f["auth_profile_override"], f["auth_profile_override_source"] = profile, string(failover.SourceUser)
	}
	return f
}

// SetModel sets a session's model as the user's exact choice (S4), with an
// optional strict profile (P3); it marks a pending live switch (O4). ref is a
// model or an alias of one, and must be a model people may choose (the chains,
// the selectable models, agents.defaults.model.allow); anything else is refused
// with an error matching ErrUnknownModel that suggests the nearest name. It is
// safe to call concurrently with a running turn of the same session: the turn's
// fallback bookkeeping never overwrites it (O3).
func (r *Router) SetModel(ctx context.Context, sessionKey, ref, profile string) error {
	m, err := r.checkModel(ref, profile)
	if err != nil {
		return err
	}
	if _, err := r.st.load(ctx, sessionKey); err != nil {
		return err
	}
	return r.st.patch(ctx, sessionKey, userModelPatch(string(m), profile))
}

// ClearModel drops every model override of a session (/model default).
func (r *Router) ClearModel(ctx context.Context, sessionKey string) error {
	if _, err := r.st.load(ctx, sessionKey); err != nil {
		return err
	}
	return r.st.patch(ctx, sessionKey, merge(clearedOverride(), map[string]any{
		"live_switch": true, "last_probe_at": nil, "notice_selected": "", "notice_active": "", "notice_reason": ""}))
}

// NewSession starts a new conversation (/new): the history, the automatic
// override and the profile pin go (O7, P2); a user's model choice stays unless
// ref names a new one (a model or an alias, checked like SetModel).
func (r *Router) NewSession(ctx context.Context, sessionKey, ref string) error {
	if ref != "" {
		m, err := r.checkModel(ref, "")
		if err != nil {
			return err
		}
		ref = string(m)
	}
	e, err := r.st.load(ctx, sessionKey)
	if err != nil {
		return err
	}
	f := map[string]any{"compaction_count": 0, "last_probe_at": nil, "summary": "", "thread_context": "",
		"notice_selected": "", "notice_active": "", "notice_reason": "",
		"auth_profile_override": "", "auth_profile_override_source": "", "auth_profile_override_compaction_count": 0}
	switch {
	case ref != "":
		f = userModelPatch(ref, "")
		f["compaction_count"] = 0
	case e.ModelOverrideSource == string(failover.SourceAuto):
		f = merge(f, clearedOverride())
	case e.ModelOverrideSource == string(failover.SourceUser) && e.AuthProfileOverrideSource == string(failover.SourceUser):
		// The user's exact model and profile choice survives /new.
		delete(f, "auth_profile_override")
		delete(f, "auth_profile_override_source")
		delete(f, "auth_profile_override_compaction_count")
	}
	f["summary"], f["thread_context"] = "", "" // the earlier messages are not read again (H3)
	return r.st.restart(ctx, sessionKey, merge(f, newCounts()))
}

// newCounts starts a new conversation's counts at zero (/reset, /new): what
// /status calls "this conversation" is paid since then (N5). /usage keeps the
// user's counts (U2).
func newCounts() map[string]any {
	return map[string]any{"paid_calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0}
}

// Reset starts over (/reset): history and every override, user or automatic, go (O7).
func (r *Router) Reset(ctx context.Context, sessionKey string) error {
	if _, err := r.st.load(ctx, sessionKey); err != nil {
		return err
	}
	return r.st.restart(ctx, sessionKey, merge(clearedOverride(), newCounts(), map[string]any{"compaction_count": 0, "last_probe_at": nil,
		"live_switch": true, "notice_selected": "", "notice_active": "", "notice_reason": "", "summary": "", "thread_context": ""}))
}

func (r *Router) modelChoice(e *Entry, channel string) commands.ModelChoice {
	sel := r.selectionFor(e, channel)
	mc := commands.ModelChoice{Selected: string(sel.selected), Source: string(sel.selectedSource()), Agent: r.agentID(e.Key, channel),
		Configured: r.choosableModels(), Aliases: r.choices.aliasMap(), Profile: e.AuthProfileOverride}
	if sel.source == failover.SourceAuto {
		mc.Active = string(sel.requested)
		mc.Reason = classify.Describe(classify.Reason(e.FallbackReason), e.FallbackStatus)
	}
	return mc
}

// modelList is what /models shows for a session.
func (r *Router) modelList(e *Entry, channel string) commands.ModelList {
	sel := r.selectionFor(e, channel)
	return commands.ModelList{Models: r.choices.entries(), Allow: r.cfg.Allow, Default: string(sel.base), Selected: string(sel.selected)}
}

// agentID names the agent serving a session, if any.
func (r *Router) agentID(key, channel string) string {
	if a := r.agentFor(key, channel); a != nil {
		return a.ID
	}
	return ""
}

// priced reports whether any model has a price (B1), so /status can estimate cost.
func (r *Router) priced() bool {
	for _, m := range r.cfg.Models {
		if m.Price != (failover.Price{}) {
			return true
		}
	}
	return false
}

// Status gathers what /status shows (N5).
func (r *Router) Status(ctx context.Context, sessionKey, channel string) (commands.StatusInfo, error) {
	e, err := r.st.load(ctx, sessionKey)
	if err != nil {
		return commands.StatusInfo{}, err
	}
	now := r.clock.Now()
	sel := r.selectionFor(e, channel)
	info := commands.StatusInfo{
		Session: sessionKey, Selected: string(sel.selected), Source: string(sel.selectedSource()), Agent: r.agentID(sessionKey, channel),
		Profile: e.AuthProfileOverride, ProfileSource: e.AuthProfileOverrideSource,
		PaidCalls: e.PaidCalls, InputTokens: e.InputTokens, OutputTokens: e.OutputTokens,
		CostUSD: e.CostUSD, Priced: r.priced(),
		Compactions: e.CompactionCount, Summaries: e.Summaries, Now: now,
	}
	if sel.source == failover.SourceAuto {
		info.Active = string(sel.requested)
		info.FallbackReason = classify.Describe(classify.Reason(e.FallbackReason), e.FallbackStatus)
		if e.LastProbeAt != nil {
			info.LastProbe = *e.LastProbeAt
			info.NextProbe = e.LastProbeAt.Add(r.cfg.ProbeInterval)
		}
	} else if e.LastProbeAt != nil {
		info.LastProbe = *e.LastProbeAt
	}
	hist, err := r.st.history(ctx, sessionKey)
	if err != nil {
		return commands.StatusInfo{}, err
	}
	for _, m := range hist {
		if m.Role == "user" {
			info.HistoryTurns++
		}
	}
	// What the next turn sends before the new message, against the window of
	// the model that would answer it.
	prompt, _ := buildPrompt(promptParts{system: r.systemPrompt(sessionKey, channel), context: e.ThreadContext,
		summary: e.Summary, hist: hist}, 0)
	info.ContextTokens = estimate(prompt[:len(prompt)-1])
	info.Summarised, info.Earlier = e.Summary != "", e.ThreadContext != ""
	info.Images = r.cfg.imageLine(sel)
	// The order the next turn tries: on a fallback whose re-try of the
	// selected model is due, the selected model comes first (S3).
	next := sel
	if sel.source == failover.SourceAuto && (e.LastProbeAt == nil || !now.Before(e.LastProbeAt.Add(r.cfg.ProbeInterval))) {
		next.requested, next.source = next.selected, next.selectedSource()
	}
	for _, m := range chainFor(next) {
		info.Next = append(info.Next, string(m))
	}
	info.ContextWindow = r.cfg.window(sel.requested)
	chain := chainFor(sel)
	if sel.source == failover.SourceAuto && sel.selected != chain[0] {
		chain = append(chain, sel.selected)
		chain = dedupe(chain)
	}
	for _, ref := range chain {
		info.Candidates = append(info.Candidates, r.candidateStates(ctx, ref)...)
	}
	// When each model of the next turn is usable again, decided as the
	// all-failed error decides it (V3), so /status names the same moment.
	for _, m := range info.Next {
		ref := failover.ModelRef(m)
		p, _ := ref.Split()
		at, err := r.engine.ReadyAt(ctx, ref, r.cfg.Profiles[p])
		if err != nil {
			r.log.Warn("candidate status", "model", ref, "err", err)
			continue
		}
		if at.After(now) {
			if info.Back == nil {
				info.Back = map[string]time.Time{}
			}
			info.Back[m] = at
		}
	}
	return info, nil
}

func dedupe(refs []failover.ModelRef) []failover.ModelRef {
	seen := map[failover.ModelRef]bool{}
	out := refs[:0]
	for _, m := range refs {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}

// candidateStates returns one /status line per profile of ref, from the engine's
// durable state (cooldowns, disables, model-scoped limits, R7 model state).
func (r *Router) candidateStates(ctx context.Context, ref failover.ModelRef) []commands.StatusLine {
	p, _ := ref.Split()
	cs, err := r.engine.CandidateStatus(ctx, ref, r.cfg.Profiles[p])
	if err != nil {
		r.log.Warn("candidate status", "model", ref, "err", err)
		return []commands.StatusLine{{Model: string(ref), State: "unknown"}}
	}
	out := make([]commands.StatusLine, 0, len(cs.Profiles))
	for _, ps := range cs.Profiles {
		line := commands.StatusLine{Model: string(ref), Profile: ps.ID, State: ps.State}
		if ps.State != failover.StateOK {
			line.Until, line.Reason, line.Recovery = ps.Until, classify.Describe(ps.Reason, classify.StatusUnknown), ps.RecoveryAt
		} else if cs.Model.State != failover.StateOK {
			// The model itself is marked unavailable (R7 repeated timeouts).
			line.State, line.Until, line.Reason = cs.Model.State, cs.Model.Until, classify.Describe(cs.Model.Reason, classify.StatusUnknown)
		}
		out = append(out, line)
	}
	return out
}

// Recover probes target ("provider/model" or a profile id) at once with the
// smallest request and, on success, clears the cooldown or disable (B3). The
// returned text says what happened.
func (r *Router) Recover(ctx context.Context, target string) (string, error) {
	provider, model, ids, err := r.recoverTarget(target)
	if err != nil || model == "" {
		if err == nil {
			return fmt.Sprintf("no configured model of provider %s to probe %s with", provider, target), nil
		}
		return "", err
	}
	ref := failover.ModelRef(provider + "/" + model)
	ok, bad, err := r.recoverProbe(ctx, ref, ids)
	if err != nil {
		return "", err
	}
	if len(ok) > 0 {
		if err := r.recovered(ctx, ref, commands.ValidProfileID(target)); err != nil {
			return "", err
		}
	}
	var b strings.Builder
	if len(ok) > 0 {
		fmt.Fprintf(&b, "recovered %s: probe answered with %s; cooldown and disable cleared", ref, strings.Join(ok, ", "))
	} else {
		fmt.Fprintf(&b, "%s is still failing; state unchanged", ref)
	}
	if len(bad) > 0 {
		fmt.Fprintf(&b, " (failed: %s)", strings.Join(bad, "; "))
	}
	return b.String(), nil
}

// recoverTarget is what /recover target probes: a model of the configuration
// with every profile of its provider, or one profile with the first
// configured model of its provider (model "" when there is none). Anything
// else is refused with the nearest name (B3).
func (r *Router) recoverTarget(target string) (provider, model string, ids []string, err error) {
	switch {
	case commands.ValidRef(target):
		provider, model = failover.ModelRef(target).Split()
		if !r.providerKnown(provider) {
			return "", "", nil, refused(ErrUnknownModel, "unknown model: provider %q is not configured%s", provider, r.recoverHint(target))
		}
		if !r.recoverable(target) {
			// A typo must not be "recovered": the probe of a name the
			// provider happens to accept would clear nothing people use.
			return "", "", nil, refused(ErrUnknownModel, "unknown model: %q is not a model of the configuration%s", target, r.recoverHint(target))
		}
		for _, pr := range r.cfg.Profiles[provider] {
			ids = append(ids, pr.ID)
		}
	case commands.ValidProfileID(target):
		provider, _, _ = strings.Cut(target, ":")
		if !slices.ContainsFunc(r.cfg.Profiles[provider], func(p failover.Profile) bool { return p.ID == target }) {
			return "", "", nil, refused(ErrUnknownProfile, "unknown profile: %q is not a configured profile%s", target, r.recoverHint(target))
		}
		ids = []string{target}
		for _, m := range r.configuredModels() {
			if p, mm := failover.ModelRef(m).Split(); p == provider {
				model = mm
				break
			}
		}
	default:
		return "", "", nil, refused(ErrUnknownModel, "unknown model: %q is neither provider/model nor a profile id%s", target, r.recoverHint(target))
	}
	if len(ids) == 0 {
		ids = []string{""} // a provider without credentials
	}
	return provider, model, ids, nil
}

// recoverProbe probes ref with each profile of ids and clears the state of
// each that answered; ok and bad name them (bad with why it failed).
func (r *Router) recoverProbe(ctx context.Context, ref failover.ModelRef, ids []string) (ok, bad []string, err error) {
	provider, model := ref.Split()
	for _, id := range ids {
		name, key := id, id
		if id == "" {
			name, key = provider, string(ref) // a provider without credentials: its per-model state
		}
		c, err := r.clients(provider, id)
		if err == nil && c == nil {
			err = errors.New("no client")
		}
		if err == nil {
			_, err = c.Check(ctx, model)
		}
		if err != nil {
			bad = append(bad, name+": "+probeFailure(err))
			continue
		}
		ok = append(ok, name)
		if err := r.engine.Clear(ctx, key); err != nil {
			return nil, nil, err
		}
	}
	return ok, bad, nil
}

// probeFailure says why a /recover probe failed, in plain words.
func probeFailure(err error) string {
	var f *failover.Failure
	if !errors.As(err, &f) {
		return redact.Preview(err.Error(), 200)
	}
	why := f.Describe()
	if f.Status != 0 && !strings.Contains(why, "HTTP") {
		why += fmt.Sprintf(" (HTTP %d)", f.Status)
	}
	return why
}

// recovered follows a /recover probe that answered: the model's scoped
// cooldowns go, the incident ends, and sessions pushed off this model (or,
// for a profile, off its provider) go back to it on their next turn, with the
// cleared notice (B3).
func (r *Router) recovered(ctx context.Context, ref failover.ModelRef, profile bool) error {
	provider, model := ref.Split()
	if err := r.engine.ClearModel(ctx, ref, r.cfg.Profiles[provider]); err != nil {
		return err
	}
	r.closeIncident(ctx)
	if profile {
		model = ""
	}
	if _, err := r.st.probeOriginsNow(ctx, provider, model); err != nil {
		r.log.Warn("recover: schedule the return of fallen-back sessions", "err", err)
	}
	return nil
}

// Known reports whether a session exists (adapters.SessionLookup): channels use
// it to recognise a conversation they took part in before a restart.
func (r *Router) Known(ctx context.Context, sessionKey string) bool {
	ok, err := r.st.exists(ctx, sessionKey)
	if err != nil {
		r.log.Warn("session lookup", "session", sessionKey, "err", err)
		return false
	}
	return ok
}
