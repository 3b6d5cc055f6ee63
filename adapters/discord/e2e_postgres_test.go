package discord_test

import (
	"testing"

	"github.com/detourbot/detour/internal/testkit/e2e"
)

// covers M1: every Discord end-to-end test again, each world on a fresh
// Postgres database (skipped without DETOUR_TEST_POSTGRES_DSN; .ci/with-postgres
// sets it).
func TestE2E_DiscordOnPostgres(t *testing.T) {
	e2e.OnPostgres(t,
		TestE2E_A5_NoticeBeforeTheFallbacksFirstText,
		TestE2E_FailedDeferralNeverMakesEphemeralPublic,
		TestE2E_GlobalRateLimitPausesEveryRouteOnce,
		TestE2E_HeartbeatMissResumesWithoutLosingQueuedEvents,
		TestE2E_L1_TypingVisibleBeforeFirstToken,
		TestE2E_L2_L5_RateLimitedEditsAndAnOversizeAnswer,
		TestE2E_L2_LongAnswerEndsSplitAcrossMessages,
		TestE2E_L2_ReplyGrowsByEditsAndEndsComplete,
		TestE2E_L2_StreamingOffGivesOneSinglePost,
		TestE2E_L3_StalledPrimaryReplacedInPlaceByFallback,
		TestE2E_L4_ModelPickerSlashAndText,
		TestE2E_MentionThreadDM,
		TestE2E_ModelInteractionWithAutocomplete,
		TestE2E_OverloadedPrimaryNoticeThenFallbackThenCleared,
		TestE2E_RateLimitedReplyDeliveredOnce,
		TestE2E_ReconnectMidConversation,
		TestE2E_RepeatedSessionLossBacksOffWithinIdentifyBudget,
		TestE2E_StatusAnsweredWithin3sWhileReplyPostSlowOrRateLimited,
		TestE2E_T3_NoLiveMentionFromHostileModelOutput,
		TestE2E_Threads_MentionOpensThreadAndConversationContinues,
	)
}
