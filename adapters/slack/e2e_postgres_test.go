package slack_test

import (
	"testing"

	"github.com/detourbot/detour/internal/testkit/e2e"
)

// covers M1: the Slack end-to-end tests again, each world on a fresh Postgres
// database (skipped without DETOUR_TEST_POSTGRES_DSN; .ci/with-postgres sets it).
func TestE2E_SlackOnPostgres(t *testing.T) {
	e2e.OnPostgres(t,
		TestE2E_SlackThreadFallbackCommandsAndReliability,
		TestE2E_SlackChannelBurstOfSixMentions_AllAnsweredPacedNoneDropped,
		TestE2E_SlackChannelModelCommand_NewThreadAnsweredByIt,
		TestE2E_SlackTwoReplicaSockets_EachEventAnsweredOnce,
		TestE2E_SlackHostileModelOutput_NoLiveMention,
		TestE2E_SlackSlowPostInOneChannel_OtherChannelAnswered,
	)
}
