package llm

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// The tools through which a workflow's classifier and extractor ask a
// model for a structured answer, and which Demo answers by rules of its
// own (see Demo).
const (
	// ClassifyTool takes {"type": <class key>}; its parameters' "type"
	// property lists the keys (enum) and describes each class in its
	// description, one "key: description" per line.
	ClassifyTool = "classify_question"
	// ExtractTool takes one property per key to extract, each described.
	ExtractTool = "extract_fields"
)

// classify picks the class whose description shares the most words with
// the question (characters, for text without spaces such as Chinese);
// the first class wins a tie. When no class shares anything it picks the
// last, where builders keep "everything else" (FastGPT's classifier takes
// the last class for what fits none).
func classify(question string, params json.RawMessage) string {
	var p struct {
		Properties struct {
			Type struct {
				Enum        []string `json:"enum"`
				Description string   `json:"description"`
			} `json:"type"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(params, &p)
	keys := p.Properties.Type.Enum
	if len(keys) == 0 {
		return ""
	}
	about := map[string]string{}
	for _, line := range strings.Split(p.Properties.Type.Description, "\n") {
		if k, d, ok := strings.Cut(line, ": "); ok {
			about[strings.TrimSpace(k)] = d
		}
	}
	asked := words(question)
	best, bestScore := keys[len(keys)-1], 0
	for _, k := range keys {
		score := 0
		for w := range words(about[k]) {
			if asked[w] {
				score++
			}
		}
		if score > bestScore {
			best, bestScore = k, score
		}
	}
	return best
}

// words is the set of a text's lower-cased words of two letters or more,
// and its CJK characters one by one.
func words(s string) map[string]bool {
	out := map[string]bool{}
	for _, f := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		var latin []rune
		for _, r := range f {
			if unicode.Is(unicode.Han, r) {
				out[string(r)] = true
				continue
			}
			latin = append(latin, r)
		}
		if len(latin) >= 2 {
			out[string(latin)] = true
		}
	}
	return out
}

var numberRe = regexp.MustCompile(`-?\d+(?:\.\d+)?`)

// extract fills each key from the text: the value after "<key>:" or
// "<key> is" (or the same after the key's description), up to the end of
// the line, a comma or a full stop; a number key takes the first number
// there, a boolean key yes/true or no/false. Keys not found are left out.
func extract(text string, params json.RawMessage) map[string]any {
	var p struct {
		Properties map[string]struct {
			Type        string `json:"type"`
			Description string `json:"description"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(params, &p)
	out := map[string]any{}
	for key, prop := range p.Properties {
		for _, name := range []string{key, prop.Description} {
			if strings.TrimSpace(name) == "" {
				continue
			}
			re := regexp.MustCompile(`(?i)` + regexp.QuoteMeta(name) + `\s*(?::|：|=|\bis\b|是)\s*([^\n,，.。;；]+)`)
			m := re.FindStringSubmatch(text)
			if m == nil {
				continue
			}
			v := strings.TrimSpace(m[1])
			switch prop.Type {
			case "number", "integer":
				if n := numberRe.FindString(v); n != "" {
					f, _ := strconv.ParseFloat(n, 64)
					out[key] = f
				}
			case "boolean":
				switch strings.ToLower(v) {
				case "yes", "true", "是":
					out[key] = true
				case "no", "false", "否":
					out[key] = false
				}
			default:
				out[key] = v
			}
			if _, found := out[key]; found {
				break
			}
		}
	}
	return out
}

// structured answers a request offering ClassifyTool or ExtractTool with
// a call of it, by Demo's rules; ok is false for other requests.
func structured(req Request) (Response, bool) {
	var question string
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == RoleUser {
			question = req.Messages[i].Content
			break
		}
	}
	for _, t := range req.Tools {
		var args any
		switch t.Function.Name {
		case ClassifyTool:
			args = map[string]string{"type": classify(question, t.Function.Parameters)}
		case ExtractTool:
			args = extract(question, t.Function.Parameters)
		default:
			continue
		}
		b, _ := json.Marshal(args)
		return Response{Message: Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_demo_1", Type: "function",
			Function: FunctionCall{Name: t.Function.Name, Arguments: string(b)}}}}, FinishReason: "tool_calls"}, true
	}
	return Response{}, false
}
