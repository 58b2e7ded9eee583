import { Link } from 'react-router'

export default function NotFound() {
  return (
    <section>
      <h1>Not found</h1>
      <p>There is nothing here, or it is not yours to see.</p>
      <Link to="/">Go to your teams</Link>
    </section>
  )
}
