package discord_test

import (
	"testing"

	"github.com/detourbot/detour/internal/testkit/e2e"
)

// covers M1: the Discord end-to-end tests again, each world on a fresh
// Postgres database (skipped without DETOUR_TEST_POSTGRES_DSN; .ci/with-postgres
// sets it).
func TestE2E_DiscordOnPostgres(t *testing.T) {
	e2e.OnPostgres(t,
		TestE2E_MentionThreadDM,
		TestE2E_OverloadedPrimaryNoticeThenFallbackThenCleared,
		TestE2E_ModelInteractionWithAutocomplete,
		TestE2E_ReconnectMidConversation,
		TestE2E_RateLimitedReplyDeliveredOnce,
		TestE2E_StatusAnsweredWithin3sWhileReplyPostSlowOrRateLimited,
		TestE2E_FailedDeferralNeverMakesEphemeralPublic,
		TestE2E_GlobalRateLimitPausesEveryRouteOnce,
		TestE2E_RepeatedSessionLossBacksOffWithinIdentifyBudget,
		TestE2E_HeartbeatMissResumesWithoutLosingQueuedEvents,
		TestE2E_T3_NoLiveMentionFromHostileModelOutput,
	)
}
