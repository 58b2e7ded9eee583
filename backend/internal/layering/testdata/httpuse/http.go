package httpuse

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/nimbus-build/nimbus/backend/api"
)

func handle(c *gin.Context) error { return api.JSON(c, http.StatusOK, nil) }
