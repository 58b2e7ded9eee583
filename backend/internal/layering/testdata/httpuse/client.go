package httpuse

import (
	"fmt"
	nethttp "net/http"
)

// fetch is a client: net/http is fine, and so is the status it reads, as long as it names no
// http.Status… constant.
func fetch(url string) error {
	resp, err := nethttp.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	if resp.StatusCode == nethttp.StatusNoContent { // flagged, whatever the import's name
		return nil
	}
	return nil
}
