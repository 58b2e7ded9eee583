import type { ArtifactFile } from '../lib/types'
import { bytes } from '../lib/format'

/** The files of an artifact version or a release: name, size and the start of the sha256. */
export function FileTable({ label, files }: { label: string; files: ArtifactFile[] }) {
  return (
    <div className="tablewrap">
      <table aria-label={label}>
        <thead>
          <tr>
            <th scope="col">File</th>
            <th scope="col">Size</th>
            <th scope="col">sha256</th>
          </tr>
        </thead>
        <tbody>
          {files.map((f) => (
            <tr key={f.name} data-file={f.name}>
              <td>{f.name}</td>
              <td>{bytes(f.size)}</td>
              <td>
                <code title={f.digest}>{f.digest.replace(/^sha256:/, '').slice(0, 16)}…</code>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}
