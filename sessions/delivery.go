package sessions

import (
	"context"

	"github.com/detourbot/detour/adapters"
)

// duplicate answers a message whose event was taken before: by this process
// before a restart, by another replica, or by this message's first sending (M3,
// M7). A stored answer that never reached the person is delivered now; one
// that did is sent again only when the sender asks for it (Inbound.Replay, the
// console's ids), marked Replayed; no model is called and nothing is stored
// again. Without a stored answer (its turn is still running somewhere, or
// stopped before it stored one) a replay request gets an error that says so.
func (r *Router) duplicate(ctx context.Context, w *writer, ev *inboundEvent) {
	in := w.in
	if ev != nil && !ev.sameMessage(in) {
		// The id names another message: another session's, another person's,
		// or other text. Its answer is not this one's (M7, issue 37).
		if in.Replay {
			_ = w.finish(ctx, reply(in, adapters.KindError, "this message id was used before for another message (another conversation, "+
				"person or text); its answer is not yours and nothing was sent to a model. Send your message with a new id"))
			return
		}
		r.log.Warn("event id taken by another message", "event", in.EventID, "session", in.SessionKey)
		return
	}
	if ev == nil || ev.AnsweredAt == nil {
		if in.Replay {
			_ = w.finish(ctx, reply(in, adapters.KindError, "this message id was taken before and has no stored answer: its turn is still running, "+
				"or it stopped before an answer was stored; nothing was sent to a model again. Send it with a new id to ask again"))
			return
		}
		r.log.Info("event already answered (another replica, or before a restart)", "event", in.EventID, "session", in.SessionKey)
		return
	}
	if ev.DeliveredAt != nil && !in.Replay {
		r.log.Info("event already answered and delivered", "event", in.EventID, "session", in.SessionKey)
		return
	}
	out := reply(in, adapters.Kind(ev.Kind), ev.Text)
	out.Model, out.Ephemeral, out.Replayed = ev.Model, ev.Ephemeral, true
	if out.Kind != adapters.KindReply {
		out.Model = ""
	}
	r.log.Info("event answered before: its stored answer is sent again", "event", in.EventID, "session", in.SessionKey,
		"delivered_before", ev.DeliveredAt != nil)
	if err := w.finish(ctx, out); err == nil && ev.DeliveredAt == nil {
		now := r.clock.Now().UTC()
		if err := r.st.answerEvent(context.WithoutCancel(ctx), in.EventID, eventAnswer{session: ev.SessionKey, out: out}, now, &now); err != nil {
			r.log.Warn("record the delivery of an event's answer", "event", in.EventID, "err", err)
		}
	}
}
