package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Download writes the file at path in the session's sandbox to w as it
// arrives; a directory arrives as a ZIP archive. It returns the answer's
// Content-Type (application/zip for a directory). Once bytes have reached
// w the download is not retried.
func (c *Client) Download(ctx context.Context, sessionID, path string, w io.Writer) (contentType string, err error) {
	r := &request{method: http.MethodGet, path: sessionPath(sessionID, "/files"), query: url.Values{"path": {path}}}
	resp, err := c.do(ctx, r)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return "", fmt.Errorf("download %s: %w", path, err)
	}
	return resp.Header.Get("Content-Type"), nil
}

// Uploaded is what Upload wrote.
type Uploaded struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// Upload writes what r reads as the file at path in the session's
// sandbox, making its parents and replacing it whole. It is retried only
// when r is an io.Seeker (an *os.File, *bytes.Reader, *strings.Reader),
// each attempt starting from where r was.
func (c *Client) Upload(ctx context.Context, sessionID, path string, r io.Reader) (*Uploaded, error) {
	req := &request{
		method: http.MethodPut, path: sessionPath(sessionID, "/files"), query: url.Values{"path": {path}},
		header: http.Header{"Content-Type": {"application/octet-stream"}}, body: r,
	}
	if s, ok := r.(io.Seeker); ok {
		start, err := s.Seek(0, io.SeekCurrent)
		if err != nil {
			return nil, fmt.Errorf("upload %s: find where the body starts: %w", path, err)
		}
		req.seeker, req.bodyStart = s, start
	}
	var out Uploaded
	if err := c.call(ctx, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
