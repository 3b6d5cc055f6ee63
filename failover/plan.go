package failover

import (
	"cmp"
	"slices"
	"sort"
	"time"

	"github.com/detourbot/detour/classify"
)

// slot is one profile of a candidate with its state.
type slot struct {
	prof   Profile
	key    string
	st     ProfileState // as read, LastUsed raised to this process's last success (P1)
	stored ProfileState // as read from the store
	until  time.Time
	why    classify.Reason
	scoped bool // the blocking cooldown is model-scoped (D2)
	tried  bool
}

type plan struct {
	ref      ModelRef
	prov     string
	model    string
	primary  bool
	strict   bool
	slots    []slot // usable first (P1), then blocked, soonest expiry first
	usable   int    // number of usable slots at the head
	kind     AttemptKind
	skip     classify.Reason
	until    time.Time // when a skipped candidate is usable again
	index    int       // the candidate's place in the chain
	mstate   ProfileState
	mblocked bool
	// row is the provider's probe row as read (A1, E1); down: its latest
	// verdict was a failure, so only a check may send to the provider.
	row  ProfileState
	down bool
}

// evaluate decides, before any call, whether candidate i is attempted, probed or
// skipped (R11, R12, B7, R7) and in which profile order (P1-P3).
func (r *runner) evaluate(i int) plan {
	pl := r.inspect(i)
	switch {
	case pl.skip != "":
		return pl
	case pl.usable > 0 && !pl.mblocked:
		if pl.down && r.req.Probe != nil {
			return r.checkOrSkip(pl)
		}
		return pl
	}
	return r.probeOrSkip(pl)
}

// checkOrSkip decides for a usable candidate of a provider that is down
// whether this run checks the provider (E1: the small request first, then the
// conversation) or skips it as cooling until the next check (E2), which A1's
// shared probe may then join or wait for.
func (r *runner) checkOrSkip(pl plan) plan {
	now := r.now()
	if !r.probed[pl.prov] {
		if won, _, _ := r.claimShared(pl.prov, now); won {
			r.markProbed(pl.prov)
			pl.kind = AttemptProbe
			return pl
		}
		pl.row = r.rowsOf([]string{pl.prov})[pl.prov] // the claim moved on: read when the next check is due
	}
	pl.skip = cmp.Or(pl.row.CooldownReason, classify.ReasonTimeout)
	if !transientCooldown(pl.skip) {
		pl.skip = classify.ReasonTimeout
	}
	pl.until = nextCheckAt(r.p, pl.row)
	if !pl.until.After(now) {
		pl.until = now // a check is in flight, or this run made its own
	}
	return pl
}

// usableNow reports whether candidate i could be tried at once, without a probe
// (R6: then nothing waits for a provider's Retry-After).
func (r *runner) usableNow(i int) bool {
	pl := r.inspect(i)
	return pl.skip == "" && pl.usable > 0 && !pl.mblocked
}

// inspect reads candidate i's state and orders its profiles (P1-P3); skip is set
// when the candidate cannot be tried at all (R12, B7, no usable profile id).
func (r *runner) inspect(i int) plan {
	ref := r.req.Chain[i]
	prov, model := ref.Split()
	now := r.now()
	pl := plan{ref: ref, prov: prov, model: model, kind: AttemptNormal, index: i,
		primary: i == 0 || (r.req.Primary != "" && ref == r.req.Primary)}
	if !pl.primary && r.e.skipCached(r.req.SessionKey, ref, now) {
		pl.skip = classify.ReasonAuth // R12
		return pl
	}
	if r.req.PromptTokens > 0 {
		if w := r.req.ContextWindow[ref]; w > 0 && r.req.PromptTokens > w {
			pl.skip = classify.ReasonContextWindow // B7
			return pl
		}
	}
	if r.req.Images && !r.req.TakesImages[ref] {
		pl.skip = classify.ReasonImageInput // I5, beside B7
		return pl
	}
	profs, strict, configured := profilesFor(r.req, prov, now)
	pl.strict = strict
	if configured && len(profs) == 0 {
		pl.skip = classify.ReasonAuth // every profile expired or the user-pinned one is unknown
		return pl
	}
	keys := append(candidateKeys(ref, profs), probeKey(prov)) // E1: the provider's probe row too, in the same read
	states, errs := r.e.getStates(r.ctx, keys)
	r.warnStoreErrs(errs)
	pl.row = states[len(states)-1]
	pl.down = providerDown(pl.row)
	states = states[:len(states)-1]
	storedUsed := make([]time.Time, len(profs))
	for j := range profs {
		storedUsed[j] = states[1+j].LastUsed
	}
	r.e.freshenLastUsed(keys[1:1+len(profs)], states[1:]) // P1 sees this process's own successes
	ms := states[0]
	pl.mstate = ms
	pl.mblocked = ms.CooldownUntil.After(now)
	pl.slots = make([]slot, len(profs))
	for j, pr := range profs {
		ps := states[1+j]
		until, why := blockedUntil(&ps, string(ref), now)
		stored := ps
		stored.LastUsed = storedUsed[j]
		pl.slots[j] = slot{prof: pr, key: keys[1+j], st: ps, stored: stored, until: until, why: why,
			scoped: !until.IsZero() && ps.CooldownModel != "" && !ps.DisabledUntil.After(now)}
	}
	pl.usable = orderSlots(pl.slots, len(r.req.Order[prov]) > 0, r.req.PinnedProfile)
	return pl
}

// probeOrSkip decides for a candidate with nothing usable whether it is skipped
// or probed (R11).
func (r *runner) probeOrSkip(pl plan) plan {
	now, prov, ms := r.now(), pl.prov, pl.mstate
	until, why := time.Time{}, classify.Reason("")
	if pl.usable == 0 {
		until, why = pl.slots[0].until, pl.slots[0].why
	}
	if pl.mblocked && (why == "" || transientCooldown(why)) {
		// R7: the model itself is marked; report that, wait for the later expiry
		if ms.CooldownUntil.After(until) {
			until = ms.CooldownUntil
		}
		why = ms.CooldownReason
		if why == "" {
			why = classify.ReasonConsecutiveTimeout
		}
	}
	pl.skip, pl.until = why, until
	switch why {
	case classify.ReasonAuth, classify.ReasonAuthPermanent:
		return pl // a persistent auth failure skips the provider
	case classify.ReasonBilling:
		if pl.primary && !pl.slots[0].st.RecoveryAt.After(now) && // E3: not before a stated reset
			r.e.claimProbe(r.ctx, prov+"#billing", r.p.BillingProbeInterval, billingSince(pl.slots), now) {
			pl.skip, pl.kind = "", AttemptProbe
		}
		return pl
	}
	if r.probed[prov] {
		return pl // at most one transient-cooldown probe per provider per run
	}
	j := probeSlot(&pl, now)
	if j < 0 {
		return pl // E3: no check before a reset the provider stated (D5, V5)
	}
	pl.slots = append([]slot(nil), pl.slots...)
	pl.slots[0], pl.slots[j] = pl.slots[j], pl.slots[0]
	claim := r.claimCooling
	if pl.down && r.req.Probe != nil {
		// E1, E2: a provider that is down is checked as A1's shared probe
		// checks it, its interval counted from its latest failure.
		claim = func(prov string, now time.Time) bool { won, _, _ := r.claimShared(prov, now); return won }
	}
	switch {
	case pl.primary:
		if until.Sub(now) <= r.p.ProbeWindow && claim(prov, now) {
			pl.skip, pl.kind = "", AttemptProbe
		}
	case !pl.mblocked && pl.usable == 0 && !pl.slots[0].scoped && siblingReason(why):
		// a profile-wide transient cooldown: a same-provider sibling is still
		// tried, within the provider's probe throttle like every probe
		if claim(prov, now) {
			pl.skip, pl.kind = "", AttemptProbe
		}
	}
	if pl.kind == AttemptProbe {
		r.markProbed(prov)
	}
	return pl
}

// billingSince is when the latest billing failure among slots happened: the
// billing probe throttle counts from there (R11).
func billingSince(slots []slot) time.Time {
	var t time.Time
	for _, sl := range slots {
		if sl.why == classify.ReasonBilling && sl.st.LastFailure.After(t) {
			t = sl.st.LastFailure
		}
	}
	return t
}

func transientCooldown(r classify.Reason) bool {
	return r != classify.ReasonBilling && r != classify.ReasonAuth && r != classify.ReasonAuthPermanent
}

func siblingReason(r classify.Reason) bool {
	switch r {
	case classify.ReasonRateLimit, classify.ReasonOverloaded, classify.ReasonUnclassified, classify.ReasonNoErrorDetails:
		return true
	}
	return false
}

// profilesFor returns the profiles a candidate of prov may use (P1-P3), without
// expired ones. configured is false for providers without credentials, which get a
// single profile with an empty id.
func profilesFor(req *Request, prov string, now time.Time) (out []Profile, strict, configured bool) {
	all := req.Profiles[prov]
	order := req.Order[prov]
	if len(all) == 0 && len(order) == 0 {
		return []Profile{{Provider: prov}}, false, false
	}
	find := func(id string) (Profile, bool) {
		for _, p := range all {
			if p.ID == id {
				return p, true
			}
		}
		if slices.Contains(order, id) {
			return Profile{ID: id, Provider: prov, Type: ProfileAPIKey}, true
		}
		return Profile{}, false
	}
	usable := func(p Profile) bool { return p.ExpiresAt.IsZero() || p.ExpiresAt.After(now) }
	if up := req.UserProfile; up != "" {
		if p, ok := find(up); ok {
			if usable(p) {
				return []Profile{p}, true, true // P3: strict
			}
			return nil, true, true
		}
		// the user pin belongs to another provider: ignore it here
	}
	if len(order) > 0 {
		for _, id := range order {
			if p, ok := find(id); ok && usable(p) {
				out = append(out, p)
			}
		}
		return out, false, true
	}
	for _, p := range all {
		if usable(p) {
			out = append(out, p)
		}
	}
	return out, false, true
}

func typeRank(t ProfileType) int {
	switch t {
	case ProfileToken:
		return 0
	case ProfileAPIKey:
		return 1
	}
	return 2
}

// orderSlots sorts slots in rotation order (P1): usable first (explicit order, or
// token before api_key then least recently used), the pinned profile first among
// them (P2, a preference); blocked ones last, soonest expiry first. It returns the
// number of usable slots.
func orderSlots(s []slot, explicit bool, pinned string) int {
	sort.SliceStable(s, func(a, b int) bool {
		ua, ub := s[a].until.IsZero(), s[b].until.IsZero()
		if ua != ub {
			return ua
		}
		if !ua {
			return s[a].until.Before(s[b].until)
		}
		if pinned != "" && (s[a].prof.ID == pinned) != (s[b].prof.ID == pinned) {
			return s[a].prof.ID == pinned
		}
		if explicit {
			return false
		}
		if ra, rb := typeRank(s[a].prof.Type), typeRank(s[b].prof.Type); ra != rb {
			return ra < rb
		}
		if !s[a].st.LastUsed.Equal(s[b].st.LastUsed) {
			return s[a].st.LastUsed.Before(s[b].st.LastUsed)
		}
		return s[a].prof.ID < s[b].prof.ID
	})
	n := 0
	for n < len(s) && s[n].until.IsZero() {
		n++
	}
	return n
}

// usableAfter reports whether a candidate after i can be tried at once (R6).
func (r *runner) usableAfter(i int) bool {
	for j := i + 1; j < len(r.req.Chain); j++ {
		if r.req.Chain[j] != r.req.Chain[i] && r.usableNow(j) {
			return true
		}
	}
	return false
}

// nextSlot returns the index of the next untried usable profile, or -1.
func (r *runner) nextSlot(pl *plan) int {
	if pl.strict {
		return -1
	}
	for j := 0; j < pl.usable; j++ {
		if !pl.slots[j].tried {
			return j
		}
	}
	return -1
}

func (r *runner) largerLater(i int) bool {
	w := r.req.ContextWindow[r.req.Chain[i]]
	if w <= 0 {
		return false
	}
	for _, ref := range r.req.Chain[i+1:] {
		if r.req.ContextWindow[ref] > w {
			return true
		}
	}
	return false
}

// planned returns the state of profile key as read when the candidate was planned.
func (pl *plan) planned(key string) (ProfileState, bool) {
	for i := range pl.slots {
		if pl.slots[i].key == key {
			return pl.slots[i].stored, true
		}
	}
	return ProfileState{}, false
}
