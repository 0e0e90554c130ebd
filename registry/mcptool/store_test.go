package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

func httpServer() Server {
	return Server{ID: "web", Name: "Web tools", Transport: TransportHTTP, URL: "https://mcp.example.com/mcp",
		Headers: map[string]string{"X-Team": "blue"}, Token: "s3cret", Enabled: true}
}

func stdioServer() Server {
	return Server{ID: "local_1", Name: "Local", Transport: TransportStdio, Command: []string{"/workspace/mcp-echo", "--flag", "it's"}, Enabled: true}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Server)
		want string // a part of the error; "" for valid
	}{
		{"http", func(s *Server) {}, ""},
		{"stdio", func(s *Server) { *s = stdioServer() }, ""},
		{"longest id", func(s *Server) { s.ID = strings.Repeat("a", 32) }, ""},
		{"id too long", func(s *Server) { s.ID = strings.Repeat("a", 33) }, "id"},
		{"id uppercase", func(s *Server) { s.ID = "Web" }, "id"},
		{"id starts with dash", func(s *Server) { s.ID = "-web" }, "id"},
		{"id with separator", func(s *Server) { s.ID = "a__b" }, `must not contain "__"`},
		{"no name", func(s *Server) { s.Name = " " }, "name is required"},
		{"unknown transport", func(s *Server) { s.Transport = "sse" }, "transport"},
		{"relative url", func(s *Server) { s.URL = "/mcp" }, "absolute http"},
		{"ftp url", func(s *Server) { s.URL = "ftp://example.com/mcp" }, "absolute http"},
		{"no host", func(s *Server) { s.URL = "https:///mcp" }, "absolute http"},
		{"http with command", func(s *Server) { s.Command = []string{"x"} }, "command is for stdio"},
		{"bad header name", func(s *Server) { s.Headers = map[string]string{"X Team": "a"} }, "not a valid HTTP header name"},
		{"reserved header", func(s *Server) { s.Headers = map[string]string{"mcp-session-id": "a"} }, "Mcp-Session-Id is set by the MCP transport"},
		{"header and token", func(s *Server) { s.Headers = map[string]string{"authorization": "Basic x"} }, "either a token or an Authorization header"},
		{"header line break", func(s *Server) { s.Headers = map[string]string{"X-A": "a\r\nX-B: b"} }, "line breaks"},
		{"token with space", func(s *Server) { s.Token = "a b" }, "token must not"},
		{"stdio without command", func(s *Server) { *s = stdioServer(); s.Command = nil }, "command must name the program"},
		{"stdio empty program", func(s *Server) { *s = stdioServer(); s.Command = []string{""} }, "command must name the program"},
		{"stdio NUL", func(s *Server) { *s = stdioServer(); s.Command = []string{"/bin/x", "a\x00b"} }, "command element 1"},
		{"stdio with url", func(s *Server) { *s = stdioServer(); s.URL = "https://example.com" }, "for http servers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := httpServer()
			tt.edit(&s)
			err := s.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v; want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrInvalid)):
				t.Fatalf("Validate: %v; want ErrInvalid saying %q", err, tt.want)
			}
		})
	}
}

func TestPublicHidesSecrets(t *testing.T) {
	s := httpServer()
	s.URL = "https://user:pa55@mcp.example.com/mcp"
	p := s.Public()
	if p.Headers["X-Team"] != Masked || len(p.Headers) != 1 {
		t.Errorf("headers: got %v, want the names with %q", p.Headers, Masked)
	}
	if !p.HasToken {
		t.Error("HasToken: got false, want true")
	}
	if strings.Contains(p.URL, "pa55") || !strings.Contains(p.URL, "mcp.example.com") {
		t.Errorf("url: got %q, want it without the password", p.URL)
	}
	for _, v := range []any{p, s, &s, []Server{s}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{"s3cret", "blue", "pa55"} {
			if strings.Contains(string(b), secret) {
				t.Errorf("JSON of %T has the secret %q: %s", v, secret, b)
			}
		}
	}
	if s.Headers["X-Team"] != "blue" {
		t.Error("Public changed the server's own headers")
	}
	if p := stdioServer().Public(); p.HasToken || p.Headers != nil || !reflect.DeepEqual(p.Command, stdioServer().Command) {
		t.Errorf("stdio public view: got %+v", p)
	}
}

func TestStore(t *testing.T) {
	ctx := context.Background()
	s := NewStore(mongotest.DB(t))

	put, err := s.Put(ctx, httpServer())
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if put.CreatedAt.IsZero() || !put.UpdatedAt.Equal(put.CreatedAt) {
		t.Errorf("Put dates: created %v, updated %v", put.CreatedAt, put.UpdatedAt)
	}
	if _, err := s.Put(ctx, httpServer()); !errors.Is(err, ErrExists) {
		t.Errorf("Put of a taken id: %v; want ErrExists", err)
	}
	bad := stdioServer()
	bad.Command = nil
	if _, err := s.Put(ctx, bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("Put of an invalid server: %v; want ErrInvalid", err)
	}
	masked := stdioServer()
	masked.ID, masked.Transport, masked.Command, masked.URL, masked.Token = "m", TransportHTTP, nil, "http://x", Masked
	if _, err := s.Put(ctx, masked); !errors.Is(err, ErrInvalid) {
		t.Errorf("Put of a placeholder token: %v; want ErrInvalid", err)
	}
	if _, err := s.Put(ctx, stdioServer()); err != nil {
		t.Fatalf("Put stdio: %v", err)
	}

	got, err := s.Get(ctx, "web")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.Token != "s3cret" || got.Headers["X-Team"] != "blue" || !got.CreatedAt.Equal(put.CreatedAt) {
		t.Errorf("Get: got %+v, want the secrets and dates as put (%+v)", got, put)
	}
	if _, err := s.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of a missing server: %v; want ErrNotFound", err)
	}

	// The admin form sends the public view back, with a new name and a new
	// header: the masked secrets stay as they were.
	p := got.Public()
	edit := Server{ID: p.ID, Name: "Renamed", Transport: p.Transport, URL: "https://mcp.example.com/v2",
		Headers: map[string]string{"X-Team": Masked, "X-Extra": "new"}, Token: Masked, Enabled: false}
	upd, err := s.Update(ctx, edit)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	got, _ = s.Get(ctx, "web")
	want := map[string]string{"X-Team": "blue", "X-Extra": "new"}
	if got.Name != "Renamed" || got.Token != "s3cret" || !reflect.DeepEqual(got.Headers, want) || got.Enabled || !got.CreatedAt.Equal(put.CreatedAt) {
		t.Errorf("after Update: got %+v; want the new settings, the kept secrets and the creation date", got)
	}
	if upd.UpdatedAt.Before(put.UpdatedAt) {
		t.Errorf("UpdatedAt went back: %v < %v", upd.UpdatedAt, put.UpdatedAt)
	}
	edit.Token, edit.Headers = "", map[string]string{"X-New": Masked}
	if _, err := s.Update(ctx, edit); !errors.Is(err, ErrInvalid) {
		t.Errorf("Update with a placeholder for a new header: %v; want ErrInvalid", err)
	}
	edit.Headers = nil
	if _, err := s.Update(ctx, edit); err != nil {
		t.Fatalf("Update clearing the token: %v", err)
	}
	if got, _ := s.Get(ctx, "web"); got.Token != "" || got.Headers != nil {
		t.Errorf("after clearing: token %q, headers %v; want none", got.Token, got.Headers)
	}
	if _, err := s.Update(ctx, Server{ID: "nope", Name: "x", Transport: TransportHTTP, URL: "http://x"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Update of a missing server: %v; want ErrNotFound", err)
	}

	list, err := s.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(list) != 2 || list[0].ID != "local_1" || list[1].ID != "web" {
		t.Errorf("List: got %+v; want local_1 then web", list)
	}
	if !reflect.DeepEqual(list[0].Command, stdioServer().Command) {
		t.Errorf("List: command %q, want %q", list[0].Command, stdioServer().Command)
	}

	if err := s.Delete(ctx, "web"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := s.Delete(ctx, "web"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete: %v; want ErrNotFound", err)
	}
	if _, err := s.Get(ctx, "web"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Delete: %v; want ErrNotFound", err)
	}
}
