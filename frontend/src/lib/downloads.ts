/** Where the server serves the nimbus CLI it was built with (backend/downloads). */
export const CLI_DOWNLOAD = '/downloads/nimbus-linux-amd64'
