package sessions

import (
	"context"
	"time"

	"github.com/detourbot/detour/adapters"
)

// delivery is what one inbound message was answered with. process gives each
// message one, in its context, and send notes the message's final answer (its
// reply or error) there: so a message gets exactly one final answer (a panic
// after the reply adds no second one), and a message with an EventID keeps that
// answer for the message sent again with the same id (M3, M7).
type delivery struct {
	in      adapters.Inbound
	claimed bool // this process took in.EventID (M3): its row is this turn's to fill
	stored  bool // the answer went into the event's row with the exchange
	// final is the reply or error sent for in (nil: none yet); delivered says the
	// adapter accepted it.
	final     *adapters.Outbound
	delivered bool
}

type deliveryKey struct{}

func withDelivery(ctx context.Context, d *delivery) context.Context {
	return context.WithValue(ctx, deliveryKey{}, d)
}

func deliveryOf(ctx context.Context) *delivery {
	d, _ := ctx.Value(deliveryKey{}).(*delivery)
	return d
}

// isFinal reports whether out is a message's final answer: a reply or an error
// to the message's own session (not a notice, not a report to the admin).
func isFinal(out adapters.Outbound) bool {
	return out.Kind == adapters.KindReply || out.Kind == adapters.KindError || out.Kind == ""
}

// note records out as the final answer of the message being processed, once.
func (d *delivery) note(out adapters.Outbound, delivered bool) {
	if d == nil || d.final != nil || !isFinal(out) || out.Channel != d.in.Channel || out.SessionKey != d.in.SessionKey {
		return
	}
	d.final, d.delivered = &out, delivered
}

// answered reports whether the message being processed has its final answer.
func (d *delivery) answered() bool { return d != nil && d.final != nil }

// recordAnswer keeps the final answer of a message whose event this process
// claimed, and whether it was delivered (M7): a message sent again with the
// same id gets it back instead of a new turn. An exchange's answer is already
// in the row (stored with the exchange, in one transaction); this write adds
// that it was delivered. Best effort: a database that fails here loses only
// the replay.
func (r *Router) recordAnswer(ctx context.Context, d *delivery) {
	if d == nil || !d.claimed || d.final == nil {
		return
	}
	now := r.clock.Now().UTC()
	ctx = context.WithoutCancel(ctx)
	var err error
	switch {
	case d.stored && d.delivered:
		err = r.st.eventDelivered(ctx, d.in.EventID, now)
	case d.stored:
		return
	default:
		var delivered *time.Time
		if d.delivered {
			delivered = &now
		}
		err = r.st.answerEvent(ctx, d.in.EventID, eventAnswer{session: d.in.SessionKey, out: *d.final}, now, delivered)
	}
	if err != nil {
		r.log.Warn("record the answer of an event", "event", d.in.EventID, "session", d.in.SessionKey, "err", err)
	}
}

// duplicate answers a message whose event was taken before: by this process
// before a restart, by another replica, or by this message's first sending (M3,
// M7). A stored answer that never reached the person is delivered now; one
// that did is sent again only when the sender asks for it (Inbound.Replay, the
// console's ids), marked Replayed; no model is called and nothing is stored
// again. Without a stored answer (its turn is still running somewhere, or
// stopped before it stored one) a replay request gets an error that says so.
func (r *Router) duplicate(ctx context.Context, in adapters.Inbound, ev *inboundEvent) {
	if ev == nil || ev.AnsweredAt == nil {
		if in.Replay {
			r.send(ctx, reply(in, adapters.KindError, "this message id was taken before and has no stored answer: its turn is still running, "+
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
	if err := r.send(ctx, out); err == nil && ev.DeliveredAt == nil {
		now := r.clock.Now().UTC()
		if err := r.st.answerEvent(context.WithoutCancel(ctx), in.EventID, eventAnswer{session: ev.SessionKey, out: out}, now, &now); err != nil {
			r.log.Warn("record the delivery of an event's answer", "event", in.EventID, "err", err)
		}
	}
}
