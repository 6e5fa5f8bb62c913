package chunk

import (
	"fmt"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
)

// SplitterVersion is the vault setting chunkSplitterVersion: which
// content splitter cuts files into chunks (engine/FORMAT.md §3.1; commonlib
// src/ContentSplitter/*). Its zero value "" is V1, as in upstream.
type SplitterVersion string

// Splitter versions. The strings are the values stored in the vault
// settings and are compared exactly (upstream does not trim or lower-case
// them).
const (
	// V1Unset is the empty setting of vaults created by old plug-ins;
	// upstream ContentSplitterV1 handles it like V1.
	V1Unset SplitterVersion = ""
	// V1 is the legacy line-aware splitter (chunks.ts splitPieces2).
	V1 SplitterVersion = "v1"
	// V2 is the newline splitter (chunks.ts splitPieces2V2).
	V2 SplitterVersion = "v2"
	// V2Segmenter selects ContentSplitterV2 as well; its useSegmenter flag
	// is ignored there, so it splits exactly like V2.
	V2Segmenter SplitterVersion = "v2-segmenter"
	// V3RabinKarp is the content-defined Rabin–Karp splitter
	// (chunks.ts splitPiecesRabinKarp), the default of new vaults.
	V3RabinKarp SplitterVersion = "v3-rabin-karp"
)

// DefaultMinimumChunkSize is upstream's default of the minimumChunkSize
// setting (commonlib src/common/models/setting.const.defaults.ts); a
// Settings.MinimumChunkSize of 0 stands for it.
const DefaultMinimumChunkSize = 20

// PieceUnit is upstream MAX_DOC_SIZE_BIN (commonlib
// src/common/models/shared.const.behabiour.ts): the piece size limit in
// bytes (V3) or UTF-16 code units (V1/V2 text) is
// PieceUnit × (CustomChunkSize + 1).
const PieceUnit = 102400

// Limits accepted by Settings.Validate. They are far above any value the
// plug-in's settings dialog offers and keep the arithmetic of the
// splitters inside int range on every platform.
const (
	// MaxCustomChunkSize is the largest CustomChunkSize accepted.
	MaxCustomChunkSize = 1 << 20
	// MaxMinimumChunkSize is the largest MinimumChunkSize accepted.
	MaxMinimumChunkSize = 1 << 30
)

// Settings are the vault settings that decide how content is split. The
// zero value means: splitter V1 (upstream reads an empty
// chunkSplitterVersion as V1), customChunkSize 0 and minimumChunkSize 20.
// Note that this is not what a new vault uses: the vault settings layer
// fills in the new-vault defaults (V3RabinKarp, 0, 20; engine/FORMAT.md §3.8).
type Settings struct {
	// Splitter is chunkSplitterVersion; "" means V1.
	Splitter SplitterVersion
	// CustomChunkSize is customChunkSize, 0 ≤ CustomChunkSize ≤
	// MaxCustomChunkSize. It scales the piece size limit (PieceUnit ×
	// (CustomChunkSize + 1)); in V3 it only affects binary data.
	CustomChunkSize int
	// MinimumChunkSize is minimumChunkSize, 0 ≤ MinimumChunkSize ≤
	// MaxMinimumChunkSize; 0 means DefaultMinimumChunkSize.
	MinimumChunkSize int
}

// Validate reports whether the settings can be used: a known splitter
// version and sizes within the documented limits. The error wraps
// engine.ErrUnsupported.
func (s Settings) Validate() error {
	switch s.Splitter {
	case V1Unset, V1, V2, V2Segmenter, V3RabinKarp:
	default:
		return fmt.Errorf("chunk: unknown splitter version %q: %w", s.Splitter, engine.ErrUnsupported)
	}
	if s.CustomChunkSize < 0 || s.CustomChunkSize > MaxCustomChunkSize {
		return fmt.Errorf("chunk: customChunkSize %d out of range [0, %d]: %w",
			s.CustomChunkSize, MaxCustomChunkSize, engine.ErrUnsupported)
	}
	if s.MinimumChunkSize < 0 || s.MinimumChunkSize > MaxMinimumChunkSize {
		return fmt.Errorf("chunk: minimumChunkSize %d out of range [0, %d]: %w",
			s.MinimumChunkSize, MaxMinimumChunkSize, engine.ErrUnsupported)
	}
	return nil
}

// PieceSize returns upstream's pieceSize for these settings:
// floor(PieceUnit × (CustomChunkSize + 1)) (commonlib
// src/ContentSplitter/ContentSplitterBase.ts getParamsFor). The settings
// must be valid.
func (s Settings) PieceSize() int64 {
	return PieceUnit * (int64(s.CustomChunkSize) + 1)
}

// minimumChunkSize returns the effective minimumChunkSize (0 means 20).
func (s Settings) minimumChunkSize() int {
	if s.MinimumChunkSize == 0 {
		return DefaultMinimumChunkSize
	}
	return s.MinimumChunkSize
}

// IsPlainText reports whether LiveSync stores a file with this vault path
// as text (a "plain" document): the path ends in .md, .txt, .svg, .html,
// .csv, .css, .js, .xml or .canvas. The test is case-sensitive, as
// upstream's (commonlib src/string_and_binary/path.ts isPlainText), so
// "README.MD" is binary.
func IsPlainText(path string) bool {
	for _, ext := range [...]string{".md", ".txt", ".svg", ".html", ".csv", ".css", ".js", ".xml", ".canvas"} {
		if strings.HasSuffix(path, ext) {
			return true
		}
	}
	return false
}

// ShouldSplitAsPlainText reports whether the splitters treat a file with
// this vault path as line-structured text ("plainSplit"): the path ends in
// .md, .txt or .canvas, case-sensitively (commonlib
// src/string_and_binary/path.ts shouldSplitAsPlainText).
func ShouldSplitAsPlainText(path string) bool {
	return strings.HasSuffix(path, ".md") || strings.HasSuffix(path, ".txt") || strings.HasSuffix(path, ".canvas")
}
