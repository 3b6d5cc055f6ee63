package store

import (
	"reflect"
	"strings"
	"unicode/utf8"

	"gorm.io/gorm"
)

// CleanText returns s as text every driver stores as given: invalid UTF-8 and
// NUL bytes become U+FFFD. PostgreSQL rejects both in a text column (so a
// provider error holding one would make a whole write fail, M1); SQLite stores
// them, and is cleaned the same way so both drivers keep the same data. Use it on
// values compared in a WHERE clause (keys) so they match the stored, cleaned text.
func CleanText(s string) string {
	if isClean(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

func isClean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == 0 || c >= utf8.RuneSelf {
			return utf8.ValidString(s[i:]) && strings.IndexByte(s[i:], 0) < 0
		}
	}
	return true
}

// registerCleaner makes every INSERT and UPDATE of db store clean text: string
// fields of the rows being created or saved, and string values of Updates maps.
// It is the one place that covers every string column of every table.
func registerCleaner(db *gorm.DB) error {
	if err := db.Callback().Create().Before("gorm:create").Register("detour:clean_text", cleanWrite); err != nil {
		return err
	}
	return db.Callback().Update().Before("gorm:update").Register("detour:clean_text", cleanWrite)
}

func cleanWrite(db *gorm.DB) {
	st := db.Statement
	if m, ok := st.Dest.(map[string]any); ok {
		for k, v := range m {
			if s, ok := v.(string); ok {
				m[k] = CleanText(s)
			}
		}
	}
	if st.Schema == nil || !st.ReflectValue.IsValid() {
		return
	}
	switch rv := reflect.Indirect(st.ReflectValue); rv.Kind() {
	case reflect.Slice, reflect.Array:
		for i := range rv.Len() {
			cleanRow(db, reflect.Indirect(rv.Index(i)))
		}
	case reflect.Struct:
		cleanRow(db, rv)
	}
}

func cleanRow(db *gorm.DB, rv reflect.Value) {
	if rv.Kind() != reflect.Struct || !rv.CanAddr() {
		return
	}
	ctx := db.Statement.Context
	for _, f := range db.Statement.Schema.Fields {
		if f.FieldType.Kind() != reflect.String || f.ReflectValueOf == nil {
			continue
		}
		fv := f.ReflectValueOf(ctx, rv)
		if !fv.CanSet() {
			continue
		}
		if s := fv.String(); !isClean(s) {
			fv.SetString(CleanText(s))
		}
	}
}
