package sessions

import (
	"strings"

	"github.com/detourbot/detour/failover"
)

// Capability-aware chains (I5): a model takes images only when the
// configuration says so (models.<ref>.input: [text, image]). A turn whose
// message holds images walks its chain, then the image fallbacks, and the
// engine skips every candidate that does not take images (reason image_input,
// recorded as B7 records a small window). Moving off the requested model for
// that reason lasts one turn: no override is kept, the session's next text turn
// goes back to its model.

// imageModels lists the models that take images.
func (c *Config) imageModels() map[failover.ModelRef]bool {
	out := map[failover.ModelRef]bool{}
	for ref, m := range c.Models {
		if m.Images {
			out[ref] = true
		}
	}
	return out
}

// imageChain is the chain of a turn with images: the selection's own chain,
// then the image fallbacks it does not hold yet. A user's exact choice (S4)
// gets no image fallbacks.
func (c *Config) imageChain(s selection) []failover.ModelRef {
	chain := chainFor(s)
	if s.source == failover.SourceUser || s.source == failover.SourceLegacy {
		return chain
	}
	return dedupe(append(chain, c.ImageFallbacks...))
}

// takersOf lists the models of chain that take images.
func (c *Config) takersOf(chain []failover.ModelRef) []string {
	var out []string
	for _, m := range chain {
		if c.Models[m].Images {
			out = append(out, string(m))
		}
	}
	return out
}

// fitImages leaves the images of ts's message out, with a note, when no model
// the turn may walk takes them.
func (t *turn) fitImages() {
	r := t.r
	if len(t.msg.images) == 0 {
		return
	}
	if len(r.cfg.takersOf(r.cfg.imageChain(t.sel))) > 0 {
		return
	}
	why := "no model this conversation may use takes images"
	if t.sel.source == failover.SourceUser || t.sel.source == failover.SourceLegacy {
		why = string(t.sel.requested) + ", your choice, does not take images"
		if all := r.cfg.takersOf(r.allModels()); len(all) > 0 {
			why += "; /model " + all[0] + " does"
		}
	} else if len(r.cfg.imageModels()) == 0 {
		why += " (models.<ref>.input: [text, image] in the configuration)"
	}
	t.msg.dropImages(why)
}

// allModels lists every model people may choose and the configuration names.
func (r *Router) allModels() []failover.ModelRef {
	var out []failover.ModelRef
	for _, m := range r.configuredModels() {
		out = append(out, failover.ModelRef(m))
	}
	return dedupe(append(out, r.cfg.ImageFallbacks...))
}

// imageLine is what /status says of images: which models a message with
// images goes to.
func (c *Config) imageLine(s selection) string {
	takers := c.takersOf(c.imageChain(s))
	switch {
	case len(takers) == 0:
		return "images: no model here takes images; a message's images are not sent"
	case takers[0] == string(s.requested):
		return "images: " + strings.Join(takers, ", then ") + " (takes images)"
	}
	return "images: " + string(s.requested) + " takes text only; a message with images goes to " + strings.Join(takers, ", then ")
}
