package slack_test

import (
	"testing"

	"github.com/detourbot/detour/internal/testkit/e2e"
)

// covers M1: every Slack end-to-end test again, each world on a fresh Postgres
// database (skipped without DETOUR_TEST_POSTGRES_DSN; .ci/with-postgres sets it).
func TestE2E_SlackOnPostgres(t *testing.T) {
	e2e.OnPostgres(t,
		TestE2E_SlackChannelBurstOfSixMentions_AllAnsweredPacedNoneDropped,
		TestE2E_SlackChannelModelCommand_NewThreadAnsweredByIt,
		TestE2E_SlackHostileModelOutput_NoLiveMention,
		TestE2E_SlackLive_A5_NoticeBeforeTheFallbacksFirstText,
		TestE2E_SlackLive_AssistantThreadOwnSessionAndPrompts,
		TestE2E_SlackLive_L1_ProgressVisibleBeforeFirstToken,
		TestE2E_SlackLive_L1_R6_StatusShowsTheWait,
		TestE2E_SlackLive_L1_StatusRateLimitedIsDropped,
		TestE2E_SlackLive_L1_StatusRefreshedUntilTheAnswerShows,
		TestE2E_SlackLive_L2_RateLimitedStreamingCalls,
		TestE2E_SlackLive_L2_ReplyGrowsAndEndsCompletePostedOnce,
		TestE2E_SlackLive_L2_StreamingOffPostsOnce,
		TestE2E_SlackLive_L2_WorkspaceRefusingStreamsGetsTheWholeAnswer,
		TestE2E_SlackLive_L3_StallThenFallbackReplacesPartialText,
		TestE2E_SlackLive_L4_ModelPickerSetsTheModel,
		TestE2E_SlackLive_L5_OversizeAnswerSplitNeverRefused,
		TestE2E_SlackLive_T3_StreamedHostileOutputNeverPings,
		TestE2E_SlackScopes_TheManifestsCoverEveryCall,
		TestE2E_SlackSlowPostInOneChannel_OtherChannelAnswered,
		TestE2E_SlackThreadFallbackCommandsAndReliability,
		TestE2E_SlackTwoReplicaSockets_EachEventAnsweredOnce,
		TestE2E_T5_T6_StrangersAndBudgetsCostNothing,
	)
}
