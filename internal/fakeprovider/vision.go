package fakeprovider

// Images in a prompt, as each protocol takes them, and what the fake keeps of a
// prompt in its call log.
//
// OpenAI-compatible APIs (openai, azure, gemini) take an image as a content
// part {"type":"image_url","image_url":{"url":"data:image/png;base64,..."}}
// beside {"type":"text","text":...} parts
// (https://platform.openai.com/docs/guides/images-vision): PNG, JPEG, WEBP and
// non-animated GIF, up to 20 MB per image ("Image input requirements"). A model
// without vision refuses the part with 400 invalid_request_error "Invalid
// content type. image_url is only supported by certain models."
//
// Anthropic's Messages API takes an image block
// {"type":"image","source":{"type":"base64","media_type":"image/png","data":...}}
// (https://docs.anthropic.com/en/docs/build-with-claude/vision): media types
// image/jpeg, image/png, image/gif and image/webp, at most 5 MB per image; a
// block whose bytes are not the media type it names is refused ("The image was
// specified using the image/png media type, but the image appears to be a
// image/jpeg image").
//
// The fake holds every protocol to those rules, refuses images sent to the
// models marked text-only (TextOnly), and proves an image reached the model: the
// answer names each image it saw by type, size and the start of its SHA-256.

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Image limits of the real APIs.
const (
	maxOpenAIImageBytes    = 20 << 20 // "Up to 20MB per image"
	maxAnthropicImageBytes = 5 << 20  // "maximum allowed size of 5MB" per image
)

// imageTypes are the media types both families take.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// seenImage is one image of a prompt as the fake decoded it.
type seenImage struct {
	MIME   string `json:"mime"`
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"` // hex of the whole digest
}

// Label is how the fake's answer names the image: "image/png, 1234 bytes,
// sha256 0a1b2c3d".
func (i seenImage) Label() string {
	return fmt.Sprintf("%s, %d bytes, sha256 %s", i.MIME, i.Bytes, i.SHA256[:8])
}

// Logged is one message of a call as the fake received it: its role, its text
// (at most maxLoggedText bytes) and its images.
type Logged struct {
	Role   string      `json:"role"`
	Text   string      `json:"text"`
	Images []seenImage `json:"images,omitempty"`
}

// maxLoggedText bounds the text the call log keeps of one message.
const maxLoggedText = 64 << 10

// part is one element of a content list, in either family's shape.
type part struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
	Source *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source"`
}

// parts returns a message's content as parts (a plain string is one text part).
func (m chatMessage) parts() []part {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []part{{Type: "text", Text: s}}
	}
	var ps []part
	_ = json.Unmarshal(m.Content, &ps)
	return ps
}

// imageError is an image the API refuses: the message it answers with.
type imageError struct{ msg string }

func (e *imageError) Error() string { return e.msg }

// decodeImages reads the images of m in api's shape, refusing what the API
// refuses.
func decodeImages(m chatMessage, index int, api API) ([]seenImage, error) {
	var out []seenImage
	for j, p := range m.parts() {
		switch {
		case p.Type == "image_url" && api != APIAnthropic:
			if p.ImageURL == nil {
				return nil, &imageError{fmt.Sprintf("Missing required parameter: 'messages[%d].content[%d].image_url'.", index, j)}
			}
			img, err := decodeDataURL(p.ImageURL.URL)
			if err != nil {
				return nil, err
			}
			out = append(out, img)
		case p.Type == "image" && api == APIAnthropic:
			if p.Source == nil || p.Source.Type != "base64" {
				return nil, &imageError{fmt.Sprintf("messages.%d.content.%d.image.source: Input tag does not match any of the expected tags: 'base64', 'url', 'file'", index, j)}
			}
			img, err := decodeAnthropicImage(p.Source.MediaType, p.Source.Data, index, j)
			if err != nil {
				return nil, err
			}
			out = append(out, img)
		case p.Type == "image_url" || p.Type == "image":
			return nil, &imageError{fmt.Sprintf("Invalid value: '%s'. Supported values are: 'text' and '%s'.", p.Type, map[bool]string{true: "image", false: "image_url"}[api == APIAnthropic])}
		}
	}
	return out, nil
}

// decodeDataURL reads an OpenAI image_url that carries its bytes inline.
func decodeDataURL(u string) (seenImage, error) {
	const unsupported = "You uploaded an unsupported image. Please make sure your image is below 20 MB in size and is of one the following formats: ['png', 'jpeg', 'gif', 'webp']."
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		// The fake has no internet to fetch an http(s) image from.
		return seenImage{}, &imageError{"Invalid image URL: the fake provider takes images as data: URLs only."}
	}
	mime, b64, ok := strings.Cut(rest, ";base64,")
	if !ok || !imageTypes[mime] {
		return seenImage{}, &imageError{unsupported}
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(data) == 0 {
		return seenImage{}, &imageError{"Invalid base64 image_url."}
	}
	if len(data) > maxOpenAIImageBytes || sniff(data) != mime {
		return seenImage{}, &imageError{unsupported}
	}
	return seen(mime, data), nil
}

// decodeAnthropicImage reads an Anthropic base64 image source.
func decodeAnthropicImage(mime, b64 string, i, j int) (seenImage, error) {
	where := fmt.Sprintf("messages.%d.content.%d.image.source.base64", i, j)
	if !imageTypes[mime] {
		return seenImage{}, &imageError{where + ".media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"}
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(data) == 0 {
		return seenImage{}, &imageError{where + ".data: invalid base64 data"}
	}
	if len(data) > maxAnthropicImageBytes {
		return seenImage{}, &imageError{where + fmt.Sprintf(": image exceeds 5 MB maximum: %d bytes > 5242880 bytes", len(data))}
	}
	if got := sniff(data); got != mime {
		return seenImage{}, &imageError{where + fmt.Sprintf(".data: The image was specified using the %s media type, but the image appears to be a %s image", mime, got)}
	}
	return seen(mime, data), nil
}

// sniff names an image's type from its first bytes.
func sniff(data []byte) string {
	if bytes.HasPrefix(data, []byte("RIFF")) && len(data) >= 12 && string(data[8:12]) == "WEBP" {
		return "image/webp"
	}
	return http.DetectContentType(data)
}

func seen(mime string, data []byte) seenImage {
	sum := sha256.Sum256(data)
	return seenImage{MIME: mime, Bytes: len(data), SHA256: hex.EncodeToString(sum[:])}
}

// imagePromptTokens is what the fake reports for one image of a prompt:
// OpenAI's flat cost of a low-detail image.
const imagePromptTokens = 85

// readImages decodes the images of every message of req into req.images, and
// answers what api answers when one is refused (status != 0).
func (req *chatRequest) readImages(w http.ResponseWriter, api API) int {
	req.images = make([][]seenImage, len(req.Messages))
	for i, m := range req.Messages {
		imgs, err := decodeImages(m, i, api)
		if err != nil {
			return refuseImage(w, api, err.Error())
		}
		req.images[i] = imgs
	}
	return 0
}

// refuseImage answers a request whose image the API would not take.
func refuseImage(w http.ResponseWriter, api API, msg string) int {
	switch api {
	case APIAnthropic:
		return writeAnthropicError(w, http.StatusBadRequest, nil, "invalid_request_error", msg)
	case APIGemini:
		return writeGoogleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", msg, nil)
	}
	return writeOpenAIError(w, http.StatusBadRequest, nil, msg, "invalid_request_error", "", strPtr("messages"))
}

// hasImages reports whether any message of req holds an image.
func (req *chatRequest) hasImages() bool {
	for _, imgs := range req.images {
		if len(imgs) > 0 {
			return true
		}
	}
	return false
}

// lastUserImages are the images of the last user message.
func (req *chatRequest) lastUserImages() []seenImage {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			if i < len(req.images) {
				return req.images[i]
			}
			return nil
		}
	}
	return nil
}

// logged is req's messages as the call log keeps them.
func (req *chatRequest) logged() []Logged {
	out := make([]Logged, len(req.Messages))
	for i, m := range req.Messages {
		t := m.text()
		if len(t) > maxLoggedText {
			t = t[:maxLoggedText]
		}
		out[i] = Logged{Role: m.Role, Text: t}
		if i < len(req.images) {
			out[i].Images = req.images[i]
		}
	}
	return out
}

// TextOnly marks models (by model name, for every provider) that take no
// images: a prompt with one is refused as the protocol refuses it.
func (s *Server) TextOnly(models ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.textOnly == nil {
		s.textOnly = map[string]bool{}
	}
	for _, m := range models {
		s.textOnly[m] = true
	}
}

// WithTextOnly is TextOnly at construction.
func WithTextOnly(models ...string) Option { return func(s *Server) { s.TextOnly(models...) } }

func (s *Server) isTextOnly(model string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.textOnly[model]
}

// refuseTextOnly answers images sent to a model without vision.
func refuseTextOnly(w http.ResponseWriter, api API) int {
	switch api {
	case APIAnthropic:
		// Anthropic documents no error for this (every current model sees
		// images); this is the fake's wording in Anthropic's shape.
		return writeAnthropicError(w, http.StatusBadRequest, nil, "invalid_request_error", "Invalid content type. image blocks are only supported by certain models.")
	case APIGemini:
		return writeGoogleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid content type. image_url is only supported by certain models.", nil)
	}
	return writeOpenAIError(w, http.StatusBadRequest, nil, "Invalid content type. image_url is only supported by certain models.",
		"invalid_request_error", "", strPtr("messages.[0].content.[1].type"))
}

// sawImages is the line a vision answer ends with: what reached the model.
func sawImages(imgs []seenImage) string {
	labels := make([]string, len(imgs))
	for i, img := range imgs {
		labels[i] = fmt.Sprintf("[saw image %d: %s]", i+1, img.Label())
	}
	return strings.Join(labels, " ")
}
