package e2ee

import (
	"strings"
	"testing"
)

func BenchmarkDecryptV2(b *testing.B) {
	c := NewWithKey(vectorKey(b), Options{})
	for _, size := range []struct {
		name string
		n    int
	}{{"256B", 256}, {"1KiB", 1 << 10}, {"1MiB", 1 << 20}} {
		b.Run(size.name, func(b *testing.B) {
			s, err := c.EncryptString(strings.Repeat("a", size.n))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size.n))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.DecryptString(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecryptV2Parallel(b *testing.B) {
	c := NewWithKey(vectorKey(b), Options{})
	s, err := c.EncryptString(strings.Repeat("a", 1<<10))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(1 << 10)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.DecryptString(s); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkEncryptV2(b *testing.B) {
	c := NewWithKey(vectorKey(b), Options{})
	p := strings.Repeat("a", 1<<10)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.EncryptString(p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDeriveKey measures one uncached 310000-round PBKDF2.
func BenchmarkDeriveKey(b *testing.B) {
	v, _ := vectors(b)
	salt := vectorSalt(b)
	pass := []byte(v.Passphrase)
	b.SetBytes(MasterKeySize)
	for b.Loop() {
		if _, err := pbkdf2SHA256(pass, salt, PBKDF2Iterations); err != nil {
			b.Fatal(err)
		}
	}
}
