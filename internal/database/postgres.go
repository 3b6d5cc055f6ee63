package database

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/detourbot/detour/redact"
)

// postgresMaxConns bounds one process's connections: turns queue for a
// connection instead of exhausting the server's max_connections when a thousand
// sessions run at once. Statements are short, so ten keep a process busy.
const postgresMaxConns = 10

// PostgresName returns dsn as errors and logs show it: a URL with its user
// information hidden, or a keyword string with its password hidden.
func PostgresName(dsn string) string {
	if strings.Contains(dsn, "://") {
		return redact.URL(dsn)
	}
	f := strings.Fields(dsn)
	for i, kv := range f {
		if k, _, ok := strings.Cut(kv, "="); ok && strings.EqualFold(k, "password") {
			f[i] = k + "=" + redact.Marker
		}
	}
	return redact.Secrets(strings.Join(f, " "))
}

// openPostgres opens the Postgres database at dsn. It returns the name errors
// use for it (PostgresName).
func openPostgres(ctx context.Context, dsn string, log *slog.Logger) (*gorm.DB, string, error) {
	name := PostgresName(dsn)
	if strings.TrimSpace(dsn) == "" {
		return nil, "", fmt.Errorf("database: empty postgres DSN: want postgres://user@host:5432/dbname")
	}
	if _, err := pgx.ParseConfig(dsn); err != nil {
		// pgx's parse errors may quote the DSN: say what is wrong without it.
		return nil, name, fmt.Errorf("database: postgres DSN %q does not parse: want postgres://user:password@host:5432/dbname?sslmode=... or \"host=... dbname=...\"", name)
	}
	db, err := gorm.Open(postgresDialect{&postgres.Dialector{Config: &postgres.Config{DSN: dsn}}}, gormConfig(log))
	if err == nil {
		err = finish(db)
	}
	if err != nil {
		if db != nil {
			_ = Close(db)
		}
		return nil, name, fmt.Errorf("database: open postgres %q: %s", name, redact.Known(err.Error(), dsn))
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, name, fmt.Errorf("database: open postgres %q: %w", name, err)
	}
	sqlDB.SetMaxOpenConns(postgresMaxConns)
	sqlDB.SetMaxIdleConns(postgresMaxConns)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, name, fmt.Errorf("database: connect to postgres %q: %w", name, err)
	}
	return db, name, nil
}
