package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// This file reads the monitoring files (grafana/strata-dashboard.json,
// prometheus/alerts.yml) and the broker's /metrics text, so metrics_test.go
// can check that every metric a query names is one the broker exports.

// query is one PromQL expression and where it was found.
type query struct {
	where string // "dashboard panel \"Request rate\"", "alert StrataUnderMinISR"
	expr  string
}

// selector is a metric a query reads, with the label names it matches on.
type selector struct {
	name   string
	labels []string
}

// Words of PromQL that are not metric names. Functions and aggregations
// only count as such before "(" (a metric may be called "time"); the
// modifiers before "(" open a list of label names.
var (
	promqlFunctions = wordSet(`abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time ceil
		changes clamp clamp_max clamp_min cos cosh count_over_time day_of_month day_of_week day_of_year
		days_in_month deg delta deriv double_exponential_smoothing exp floor histogram_avg histogram_count
		histogram_fraction histogram_quantile histogram_stddev histogram_stdvar histogram_sum holt_winters hour
		idelta increase info irate label_join label_replace last_over_time ln log10 log2 mad_over_time
		max_over_time min_over_time minute month pi predict_linear present_over_time quantile_over_time rad rate
		resets round scalar sgn sin sinh sort sort_by_label sort_by_label_desc sort_desc sqrt stddev_over_time
		stdvar_over_time sum_over_time tan tanh time timestamp vector year`)
	promqlAggregations = wordSet(`avg bottomk count count_values group limit_ratio limitk max min quantile
		stddev stdvar sum topk`)
	promqlLabelLists = wordSet(`by without on ignoring group_left group_right`)
	promqlKeywords   = wordSet(`and or unless bool offset atan2 inf nan`)
)

func wordSet(words string) map[string]bool {
	set := map[string]bool{}
	for _, w := range strings.Fields(words) {
		set[w] = true
	}
	return set
}

// grafanaLabelValues matches a dashboard variable's label_values(METRIC, LABEL).
var grafanaLabelValues = regexp.MustCompile(`^\s*label_values\((.+),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)

// selectors returns the metrics expr reads. A metric is an identifier that
// is not a PromQL function, aggregation, keyword or label name, outside
// strings, ranges ([5m]) and Grafana variables ($__rate_interval); the
// label names of its {matchers} come with it. A misspelt function
// ("rat(x)") comes out as a metric, so the check catches it too.
func selectors(expr string) []selector {
	if m := grafanaLabelValues.FindStringSubmatch(expr); m != nil {
		expr = m[1] // the metric whose label values a Grafana variable lists
	}
	var out []selector
	s := []rune(expr)
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(s, i)
		case c == '[':
			i = skipPast(s, i, ']')
		case c == '{': // matchers of a bare selector, {__name__=...} aside
			_, i = matcherLabels(s, i)
		case c == '$': // Grafana variable: $name or ${name}
			i = skipVariable(s, i)
		case isDigit(c) || (c == '.' && i+1 < len(s) && isDigit(s[i+1])):
			for i < len(s) && (isIdent(s[i]) || s[i] == '.') { // 0.99, 5m, 1e3
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(s) && isIdent(s[i]) {
				i++
			}
			word, next := string(s[start:i]), nextNonSpace(s, i)
			lower := strings.ToLower(word)
			switch {
			case promqlLabelLists[lower]:
				if next < len(s) && s[next] == '(' {
					i = skipPast(s, next, ')')
				}
			case promqlKeywords[lower]:
			case (promqlFunctions[word] || promqlAggregations[word]) && next < len(s) && (s[next] == '(' || promqlLabelLists[peekWord(s, next)]):
			default:
				sel := selector{name: word}
				if next < len(s) && s[next] == '{' {
					sel.labels, i = matcherLabels(s, next)
				}
				out = append(out, sel)
			}
		default:
			i++
		}
	}
	return out
}

func isDigit(c rune) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c rune) bool { return c == '_' || c == ':' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isIdent(c rune) bool      { return isIdentStart(c) || isDigit(c) }

func nextNonSpace(s []rune, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// peekWord is the identifier starting at i ("" if none), lower-cased.
func peekWord(s []rune, i int) string {
	j := i
	for j < len(s) && isIdent(s[j]) {
		j++
	}
	return strings.ToLower(string(s[i:j]))
}

// skipString returns the index after the string literal starting at i.
func skipString(s []rune, i int) int {
	quote := s[i]
	for i++; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quote != '`':
			i++
		case s[i] == quote:
			return i + 1
		}
	}
	return i
}

// skipPast returns the index after the first close at or after i that
// is outside a string.
func skipPast(s []rune, i int, close rune) int {
	for i++; i < len(s); {
		switch s[i] {
		case close:
			return i + 1
		case '"', '\'', '`':
			i = skipString(s, i)
		default:
			i++
		}
	}
	return i
}

func skipVariable(s []rune, i int) int {
	if i+1 < len(s) && s[i+1] == '{' {
		return skipPast(s, i+1, '}')
	}
	for i++; i < len(s) && isIdent(s[i]); i++ {
	}
	return i
}

// matcherLabels reads {l1="v", l2=~"w"} starting at the "{" at i and
// returns the label names and the index after "}".
func matcherLabels(s []rune, i int) ([]string, int) {
	var labels []string
	for i++; i < len(s); {
		c := s[i]
		switch {
		case c == '}':
			return labels, i + 1
		case c == '"' || c == '\'' || c == '`':
			i = skipString(s, i)
		case isIdentStart(c):
			start := i
			for i < len(s) && isIdent(s[i]) {
				i++
			}
			labels = append(labels, string(s[start:i]))
		default:
			i++
		}
	}
	return labels, i
}

// dashboardQueries returns every PromQL expression of a Grafana dashboard:
// each panel target's expr (panels nested in collapsed rows too) and each
// query variable's query.
func dashboardQueries(t *testing.T, path string) []query {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		ID      int     `json:"id"`
		Title   string  `json:"title"`
		Type    string  `json:"type"`
		Panels  []panel `json:"panels"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	}
	var dash struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var queries []query
	ids := map[int]string{}
	var walk func([]panel)
	walk = func(panels []panel) {
		for _, p := range panels {
			if other, dup := ids[p.ID]; dup {
				t.Errorf("%s: panels %q and %q share id %d", path, other, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", path, p.Title)
			}
			for _, target := range p.Targets {
				queries = append(queries, query{fmt.Sprintf("dashboard panel %q", p.Title), target.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(v.Query, &q) != nil { // the older form: a plain string
			_ = json.Unmarshal(v.Query, &q.Query)
		}
		queries = append(queries, query{fmt.Sprintf("dashboard variable %q", v.Name), q.Query})
	}
	return queries
}

// alertQueries returns the expr of every rule in a Prometheus rule file,
// line by line (the module has no direct YAML dependency): `expr: X` on
// one line, or `expr: |` / `expr: >` followed by a block of lines indented
// deeper than the key. Each rule's name is the `alert:` or `record:` before it.
func alertQueries(t *testing.T, path string) []query {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		queries []query
		rule    string
		block   *query // the block scalar being read
		indent  int    // of its expr: key
	)
	keyRE := regexp.MustCompile(`^(\s*)(?:- )?(alert|record|expr):\s*(.*?)\s*$`)
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		if block != nil {
			trimmed := strings.TrimSpace(line)
			if trimmed == "" || len(line)-len(strings.TrimLeft(line, " ")) > indent {
				block.expr += " " + trimmed
				continue
			}
			queries = append(queries, *block)
			block = nil
		}
		m := keyRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		switch value := unquoteYAML(m[3]); {
		case m[2] != "expr":
			rule = m[2] + " " + value
		case value == "|" || value == ">" || value == "|-" || value == ">-":
			block, indent = &query{where: rule}, len(m[1])
		default:
			queries = append(queries, query{rule, value})
		}
	}
	if block != nil {
		queries = append(queries, *block)
	}
	return queries
}

// unquoteYAML strips a YAML scalar's quotes (no escapes are used in rules).
func unquoteYAML(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

// exposition is what a /metrics scrape says: each family's type and the
// label names its series carry.
type exposition struct {
	types  map[string]string          // family -> counter, gauge, histogram, ...
	labels map[string]map[string]bool // family -> label names of its series
}

var seriesRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s`)

// parseExposition reads Prometheus's text format.
func parseExposition(text string) exposition {
	e := exposition{types: map[string]string{}, labels: map[string]map[string]bool{}}
	for line := range strings.Lines(text) {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			e.types[f[2]] = f[3]
			continue
		}
		m := seriesRE.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(line, "#") {
			continue
		}
		family, ok := e.family(m[1])
		if !ok {
			continue
		}
		if e.labels[family] == nil {
			e.labels[family] = map[string]bool{}
		}
		labels, _ := matcherLabels([]rune(m[2]+" "), 0)
		for _, l := range labels {
			e.labels[family][l] = true
		}
	}
	return e
}

// family maps a series name to its family: itself, or for a histogram or
// summary the name without _bucket, _sum or _count.
func (e exposition) family(series string) (string, bool) {
	if _, ok := e.types[series]; ok {
		return series, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, cut := strings.CutSuffix(series, suffix)
		if typ := e.types[base]; cut && (typ == "histogram" || typ == "summary" && suffix != "_bucket") {
			return base, true
		}
	}
	return "", false
}

// targetLabels are added by Prometheus to every scraped series; up is the
// series Prometheus records for each target. Neither comes from a broker.
var (
	targetLabels     = map[string]bool{"instance": true, "job": true}
	prometheusSeries = map[string]bool{"up": true}
)

// problems returns what in queries the exposition does not have: unknown
// metric names, and label names that no series of the family carries.
func (e exposition) problems(queries []query) []string {
	var out []string
	for _, q := range queries {
		sels := selectors(q.expr)
		if len(sels) == 0 {
			out = append(out, fmt.Sprintf("%s: no metric found in %q", q.where, q.expr))
		}
		for _, sel := range sels {
			if prometheusSeries[sel.name] {
				continue
			}
			family, ok := e.family(sel.name)
			if !ok {
				out = append(out, fmt.Sprintf("%s: metric %s is not exported by the broker", q.where, sel.name))
				continue
			}
			for _, l := range sel.labels {
				if !targetLabels[l] && !e.labels[family][l] && l != "__name__" {
					out = append(out, fmt.Sprintf("%s: %s has no label %q", q.where, sel.name, l))
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
