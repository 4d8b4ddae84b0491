package metrics

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Check parses a /metrics page in the Prometheus text format and reports
// the first problem: a parse error, a family without HELP or TYPE, a
// sample of a family never declared, or the same series twice. Tests of
// every process's /metrics run it.
func Check(r io.Reader) (families int, err error) {
	text, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(text)))
	if err != nil {
		return 0, fmt.Errorf("parse: %w", err)
	}
	help, typ, seen := map[string]bool{}, map[string]string{}, map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(text)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch f := strings.Fields(line); {
		case len(f) >= 3 && f[0] == "#" && f[1] == "HELP":
			help[f[2]] = true
		case len(f) >= 4 && f[0] == "#" && f[1] == "TYPE":
			typ[f[2]] = f[3]
		case line == "" || strings.HasPrefix(line, "#"):
		default:
			series := line[:strings.LastIndexByte(line, ' ')]
			if seen[series] {
				return 0, fmt.Errorf("series %s appears twice", series)
			}
			seen[series] = true
			if fam := family(series, typ); fam == "" {
				return 0, fmt.Errorf("sample %s has no TYPE", series)
			} else if !help[fam] {
				return 0, fmt.Errorf("family %s has no HELP", fam)
			}
		}
	}
	return len(fams), sc.Err()
}

// family names the declared family a series belongs to: its name, or for
// histograms and summaries its name less _bucket, _sum or _count.
func family(series string, typ map[string]string) string {
	name, _, _ := strings.Cut(series, "{")
	if typ[name] != "" {
		return name
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && typ[base] != "" {
			return base
		}
	}
	return ""
}
