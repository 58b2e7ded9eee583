package a

import "testing"

func TestBoth(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *gorm.DB) {})
}

func TestNested(t *testing.T) {
	t.Run("case", func(t *testing.T) { storetest.Each(t, nil) })
}

func TestPlain(t *testing.T) {}
