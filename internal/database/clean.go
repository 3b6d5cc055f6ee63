package database

import (
	"reflect"

	"gorm.io/gorm"

	"github.com/detourbot/detour/internal/store"
)

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
				m[k] = store.CleanText(s)
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
		s := fv.String()
		if c := store.CleanText(s); c != s {
			fv.SetString(c)
		}
	}
}
